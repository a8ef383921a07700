import HLSCacheCore

/// What asking for a download under a ``FetchKey`` gave: a download this request started, or one already in flight.
enum FetchJoin<Fetch> {
    case started(Fetch)
    case joined(Fetch)

    var fetch: Fetch {
        switch self {
        case .started(let fetch), .joined(let fetch): fetch
        }
    }

    var isStarted: Bool {
        if case .started = self { return true }
        return false
    }

    /// How the request is counted and logged (``CacheResult``): a download that is not stored is relayed, one this
    /// request started is a miss, one it joined is coalesced.
    func cacheResult(stored: Bool) -> CacheResult {
        guard stored else { return .passthrough }
        return isStarted ? .miss : .coalesced
    }
}
