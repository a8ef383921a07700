import HLSCacheCore
import Synchronization

/// Gets an origin's cookies again, as a player reloading the page would: a CDN that sets its access token as a cookie
/// on the multivariant playlist (Akamai's `hdntl`, CloudFront signed cookies) refuses segments and keys with 401 or
/// 403 once the token expired, or when this process never fetched that playlist (it was served from the cache,
/// prewarmed by `hlscache fetch`).
///
/// One per ``OriginClient`` (``OriginClient/cookies``), used by the proxy and the downloader alike:
/// - where the cookies come from: the multivariant playlist last read from each origin (``learn(page:)``, the
///   proxy's playlists), else the page the ``PageSource`` names (`serve`: the top playlist of the item a refused
///   resource belongs to);
/// - the refreshes: one request per page at a time, and none again within the interval the caller gives (several
///   refused requests share one fetch of the page).
package final class CookieRefresher: Sendable {
    /// For a URL an origin refused: the page whose answer sets the cookies it wants, or `nil` when none is known.
    package typealias PageSource = @Sendable (OriginURL) async -> OriginURL?

    private struct State {
        /// The pages learnt, by origin (`scheme://authority`).
        var learnt: BoundedLRU<String, String>
        var source: PageSource?
        /// Refreshes by page: the one under way or done last, and when it started.
        var refreshes: BoundedLRU<String, Refresh>
    }

    private let state: Mutex<State>

    private struct Refresh {
        var task: Task<Void, Never>
        var started: ContinuousClock.Instant
    }

    /// - Parameters:
    ///   - maxOrigins: the most origins whose page is remembered (least recently used out).
    ///   - maxPages: the most pages whose last refresh is remembered.
    package init(maxOrigins: Int = 1024, maxPages: Int = 1024) {
        state = Mutex(State(learnt: BoundedLRU(maxCount: maxOrigins), refreshes: BoundedLRU(maxCount: maxPages)))
    }

    /// Lets refused requests get cookies (``OriginClient`` asks again, once, after a refresh): from the pages learnt,
    /// else from the page `source` names. Without a source (`nil`, the default) a refusal is delivered as it came.
    package func setPageSource(_ source: PageSource?) {
        state.withLock { $0.source = source }
    }

    /// Whether refused requests get cookies (a page source is set).
    var isEnabled: Bool { state.withLock { $0.source != nil } }

    /// Remembers `page`, a multivariant playlist just read, as where its origin's cookies come from.
    package func learn(page: OriginURL) {
        let origin = Self.origin(of: page)
        state.withLock { _ = $0.learnt.setValue(page.string, forKey: origin) }
    }

    /// The page that sets the cookies `url`'s origin wants: the one learnt for its origin, else the source's.
    package func page(for url: OriginURL) async -> OriginURL? {
        let (learnt, source) = state.withLock { ($0.learnt.value(forKey: Self.origin(of: url)), $0.source) }
        if let page = learnt.flatMap({ try? OriginURL($0) }) { return page }
        guard let source else { return nil }
        return await source(url)
    }

    /// Runs `fetch` (a request for `page`, for the cookies its answer sets) unless a refresh of `page` is under way or
    /// started within `interval`; then waits for that one instead.
    package func refresh(_ page: OriginURL, within interval: Duration, _ fetch: @escaping @Sendable () async -> Void) async {
        let now = ContinuousClock.now
        let task = state.withLock { state -> Task<Void, Never> in
            if let recent = state.refreshes.value(forKey: page.string), now - recent.started < interval { return recent.task }
            let task = Task { await fetch() }
            _ = state.refreshes.setValue(Refresh(task: task, started: now), forKey: page.string)
            return task
        }
        await task.value
    }

    private static func origin(of url: OriginURL) -> String { "\(url.scheme)://\(url.authority)" }
}
