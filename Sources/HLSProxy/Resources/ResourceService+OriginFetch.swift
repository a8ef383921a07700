import HLSCacheCore

extension ResourceService {
    /// The one way a miss reaches the origin: a client's miss, a playlist fetched again for new tokens, read-ahead and
    /// the background fill behind a range relay all ask here, so every request for one ``FetchKey`` shares one
    /// ``SharedFetch`` (one origin request), started here when this request is the first.
    func originFetch(key: CacheKey, url: OriginURL, cacheable: Bool, purpose: FetchPurpose = .client) -> FetchJoin<SharedFetch> {
        let join = services.fetches.join(FetchKey(key: key, url: url, cacheable: cacheable)) {
            SharedFetch(key: key, url: url, cacheable: cacheable, purpose: purpose, services: services)
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
