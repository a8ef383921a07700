import HLSCacheCore
import NIOConcurrencyHelpers

/// Why a download is started; decides what a ``SharedFetch`` does while no client reads it.
enum FetchPurpose: Sendable, Equatable {
    /// A client's miss: the client reads it.
    case client
    /// Read-ahead of the segments after the one a player asked for: unwatched until a player asks for one, and
    /// cancelled when the player switches to another variant.
    case readAhead
    /// The whole object behind a range relayed from the origin: unwatched, so it goes on only while worth storing.
    case background
}

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

/// The downloads in flight by fetch key: what makes concurrent misses share one. A value type (keep it under a lock),
/// generic so its rules are unit-tested with plain objects.
struct FetchTable<Fetch: AnyObject> {
    private var fetches: [FetchKey: Fetch] = [:]

    /// The download in flight under `key`, or a new one made by `make` and registered (`started`: start it).
    mutating func join(_ key: FetchKey, make: () -> Fetch) -> FetchJoin<Fetch> {
        if let existing = fetches[key] { return .joined(existing) }
        let fetch = make()
        fetches[key] = fetch
        return .started(fetch)
    }

    func existing(_ key: FetchKey) -> Fetch? { fetches[key] }

    /// Removes `fetch` (when it ended or failed). A download that ended after another replaced it under its key leaves
    /// the newer one in place: removal is by identity.
    mutating func remove(_ fetch: Fetch) {
        for (key, value) in fetches where value === fetch { fetches[key] = nil }
    }

    var count: Int { fetches.count }
}

extension FetchTable: Sendable where Fetch: Sendable {}

/// In-flight origin downloads, so concurrent misses share one (docs/design.md, "Cache store"). Downloads are
/// started only through ``ResourceService/originFetch(key:url:cacheable:purpose:)``.
final class SharedFetchRegistry: Sendable {
    private let table = NIOLockedValueBox(FetchTable<SharedFetch>())

    fileprivate func join(_ key: FetchKey, make: () -> SharedFetch) -> FetchJoin<SharedFetch> {
        table.withLockedValue { $0.join(key, make: make) }
    }

    func existing(_ key: FetchKey) -> SharedFetch? {
        table.withLockedValue { $0.existing(key) }
    }

    func remove(_ fetch: SharedFetch) {
        table.withLockedValue { $0.remove(fetch) }
    }

    var count: Int { table.withLockedValue { $0.count } }
}

extension ResourceService {
    /// The one way a miss reaches the origin: a client's miss, a playlist fetched again for new tokens, read-ahead and
    /// the background fill behind a range relay all ask here, so every request for one ``FetchKey`` shares one
    /// ``SharedFetch`` (one origin request), started here when this request is the first.
    func originFetch(key: CacheKey, url: OriginURL, cacheable: Bool, purpose: FetchPurpose = .client) -> FetchJoin<SharedFetch> {
        let join = services.fetches.join(FetchKey(key: key, url: url, cacheable: cacheable)) {
            SharedFetch(
                key: key, url: url, cacheable: cacheable, isReadAhead: purpose == .readAhead, background: purpose == .background,
                services: services)
        }
        if case .started(let fetch) = join { fetch.start() }
        return join
    }

    /// Streams `fetch` to the client (`range`: only those bytes). A download that failed just before the client joined
    /// is not the client's failure: it gets one fresh attempt of its own, and if that fails at once too (a refused
    /// destination, a closed port), `fallback` is called with the failure, or the client is answered with it.
    func subscribe(
        _ responder: Responder, to fetch: SharedFetch, range: (first: Int64, last: Int64)?, key: CacheKey, url: OriginURL, cacheable: Bool,
        fallback: ((any HTTPMappableError) -> Void)? = nil
    ) {
        let subscription = FetchSubscription(responder: responder, fetch: fetch, range: range, services: services, fallback: fallback)
        guard !fetch.subscribe(subscription) else { return }
        services.fetches.remove(fetch)
        let fresh = originFetch(key: key, url: url, cacheable: cacheable).fetch
        let retry = FetchSubscription(responder: responder, fetch: fresh, range: range, services: services, fallback: fallback)
        guard !fresh.subscribe(retry) else { return }
        let failure = fresh.failure ?? ProxyError.unavailable("origin \(url.host) is failing")
        if let fallback {
            fallback(failure)
        } else {
            responder.send(error: failure)
        }
    }
}
