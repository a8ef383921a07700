import Foundation
import HLSCacheCore

extension ResourceService {
    /// The one way a miss reaches the origin: a client's miss, a playlist fetched again for new tokens, read-ahead and
    /// the background fill behind a range relay all ask here, so every request for one ``FetchKey`` shares one
    /// ``SharedFetch`` (one origin request), started here when this request is the first.
    func originFetch(key: CacheKey, url: OriginURL, cacheable: Bool, purpose: FetchPurpose = .client) -> FetchJoin<SharedFetch> {
        originFetch(key: key, url: url, cacheable: cacheable, purpose: purpose, unlessRemovedSince: nil)!
    }

    /// As ``originFetch(key:url:cacheable:purpose:)`` after a store lookup that began when ``FetchRegistry/removals``
    /// was `seen`: nil when nothing is in flight and a download ended since — look in the store again
    /// (``FetchTable/join(_:unlessRemovedSince:make:)``). A download that is not stored has nothing to look for.
    func originFetch(
        key: CacheKey, url: OriginURL, cacheable: Bool, purpose: FetchPurpose = .client, unlessRemovedSince seen: UInt64?
    ) -> FetchJoin<SharedFetch>? {
        let fetchKey = FetchKey(key: key, url: url, cacheable: cacheable)
        let make = { SharedFetch(key: key, url: url, cacheable: cacheable, purpose: purpose, services: self.services) }
        let joined =
            if let seen, cacheable { services.fetches.join(fetchKey, unlessRemovedSince: seen, make: make) } else {
                services.fetches.join(fetchKey, make: make)
            }
        guard let join = joined else { return nil }
        if case .started(let fetch) = join {
            if cacheable { logLiveSegmentMiss(key: key, url: url, purpose: purpose) }
            fetch.start()
        }
        return join
    }

    /// At debug level, why a live stream's segment is asked of the origin: never stored here, or its stored copy
    /// expired (a live segment is kept for its playlist's window, docs/architecture.md).
    private func logLiveSegmentMiss(key: CacheKey, url: OriginURL, purpose: FetchPurpose) {
        guard services.logger.logLevel <= .debug, services.playlists.liveExpiry(of: key) != nil else { return }
        let reason =
            services.store.knownExpiry(of: key).map { String(format: "its stored copy expired %.1f s ago", -$0.timeIntervalSinceNow) }
            ?? "not stored"
        services.logger.debug("live segment asked of the origin: \(reason)", metadata: ["url": "\(url.redacted)", "purpose": "\(purpose)"])
    }

    /// Streams `fetch` to the client (`range`: only those bytes). A download that failed just before the client joined
    /// is not the client's failure: it gets one fresh attempt of its own, and if that fails at once too (a refused
    /// destination, a closed port), `fallback` is called with the failure, or the client is answered with it. A
    /// download this request started (`started`) that the origin failed is its own: that failure is the answer, not a
    /// second request to the origin. One it started that this server stopped before the client subscribed (an answer
    /// not stored, whole before anyone read it) gets the fresh attempt.
    func subscribe(
        _ responder: Responder, to fetch: SharedFetch, started: Bool, range: (first: Int64, last: Int64)?, key: CacheKey, url: OriginURL,
        cacheable: Bool, fallback: ((any HTTPMappableError) -> Void)? = nil
    ) {
        let subscription = FetchSubscription(responder: responder, fetch: fetch, range: range, services: services, fallback: fallback)
        guard !fetch.subscribe(subscription) else { return }
        var failed = fetch
        if !started || !fetch.failedAtOrigin {
            services.fetches.remove(fetch)
            failed = originFetch(key: key, url: url, cacheable: cacheable).fetch
            let retry = FetchSubscription(responder: responder, fetch: failed, range: range, services: services, fallback: fallback)
            guard !failed.subscribe(retry) else { return }
        }
        let failure = failed.failure ?? ProxyError.unavailable("origin \(url.host) is failing")
        if let fallback {
            fallback(failure)
        } else {
            responder.send(error: failure)
        }
    }
}
