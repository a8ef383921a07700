import HLSCacheCore

/// The steps of one origin request, from the URL asked for to a delivered head or a failure: the destination check of
/// every hop, the attempts, redirects (at most ``maxRedirects``, no loop), retries of a 502/503/504 or of a failure
/// before the head (at most ``maxRetries`` per hop, after a backoff), and one new attempt after fetching the cookies
/// of a 401/403 (``OriginClient/cookies``).
///
/// Pure: each event returns the next ``Action`` and ``OriginRequestDriver`` runs it on the request's event loop
/// (`let action = machine.x(); run(action)`, as in async-http-client), so a request whose destination is known and
/// whose host has a free connection runs from start to head without a Swift `Task`.
struct OriginRequestStateMachine {
    enum Action {
        /// Check `url` against the destination policy (resolving its host when its addresses are not remembered),
        /// then call ``destinationChecked(_:)`` or ``destinationRefused(_:)``.
        case checkDestination(OriginURL)
        /// Make one exchange, then call ``attemptEnded(_:)`` (or ``attemptFailed(_:)`` when it could not start).
        /// `retryStatuses`: a 502/503/504 may be swallowed for a retry; `retryAuthorization`: a 401/403 may be
        /// swallowed to ask again with fresh cookies.
        case attempt(url: OriginURL, method: OriginMethod, addresses: [OriginIPAddress], retryStatuses: Bool, retryAuthorization: Bool)
        /// Wait before retry number `retry` (at least `retryAfter`, the origin's wish, within the policy's longest
        /// delay), then call ``backoffEnded()``.
        case backoff(retry: Int, retryAfter: Duration?, reason: String)
        /// Fetch the page that sets the cookies of `requested` (if one is known and is not `requested` itself), then
        /// call ``cookiesRefreshed()``. `refused` and `status` say what was refused, for the log.
        case refreshCookies(requested: OriginURL, refused: OriginURL, status: Int)
        /// Follow the redirect from `from` to `to` (for the log): the next action is `then`.
        indirect case redirected(from: OriginURL, to: OriginURL, status: Int, then: Action)
        /// Finish the request with this error.
        case fail(OriginError)
        /// Nothing: the head was delivered and the exchange's delegate finishes the request.
        case none
    }

    private let requested: (url: OriginURL, method: OriginMethod)
    let maxRedirects: Int
    let maxRetries: Int
    private(set) var url: OriginURL
    private(set) var method: OriginMethod
    private var visited: Set<String>
    private(set) var redirects = 0
    private(set) var retries = 0
    /// Whether a 401/403 may still lead to a cookie refresh and one more try (once per request).
    private(set) var mayRefreshCookies: Bool

    init(url: OriginURL, method: OriginMethod, mayRefreshCookies: Bool, maxRedirects: Int, maxRetries: Int) {
        requested = (url, method)
        self.url = url
        self.method = method
        visited = [url.string]
        self.mayRefreshCookies = mayRefreshCookies
        self.maxRedirects = maxRedirects
        self.maxRetries = maxRetries
    }

    /// The first step.
    mutating func start() -> Action { nextHop() }

    mutating func destinationChecked(_ addresses: [OriginIPAddress]) -> Action {
        .attempt(
            url: url, method: method, addresses: addresses, retryStatuses: retries < maxRetries, retryAuthorization: mayRefreshCookies)
    }

    mutating func destinationRefused(_ error: OriginError) -> Action { .fail(error) }

    /// The exchange could not start (a request that cannot be made, no connection slot in time).
    mutating func attemptFailed(_ error: any Error) -> Action { .fail(OriginError.mapping(error, afterHead: false)) }

    mutating func attemptEnded(_ outcome: OriginAttemptOutcome) -> Action {
        switch outcome {
        case .delivered:
            return .none
        case .redirect(let target, let status):
            redirects += 1
            guard redirects <= maxRedirects else {
                return .fail(OriginError.tooManyRedirects.with("more than \(maxRedirects) from \(url.host)"))
            }
            guard visited.insert(target.string).inserted else {
                return .fail(OriginError.tooManyRedirects.with("redirect loop at \(target.host)\(target.path)"))
            }
            let from = url
            if status == 303 && method != .HEAD { method = .GET }
            url = target
            retries = 0
            return .redirected(from: from, to: target, status: status, then: nextHop())
        case .authorizationRefused(let status):
            // The page is looked up, and the request made again, for the URL asked for: a redirect's target (a CDN
            // edge, a signed URL that may have expired) is the origin's to give again.
            mayRefreshCookies = false
            return .refreshCookies(requested: requested.url, refused: url, status: status)
        case .retryStatus(let status, let retryAfter):
            retries += 1
            return .backoff(retry: retries, retryAfter: retryAfter, reason: "status \(status)")
        case .failedBeforeHead(let error):
            guard retries < maxRetries, OriginError.isRetryableBeforeHead(error) else {
                return .fail(OriginError.mapping(error, afterHead: false))
            }
            retries += 1
            return .backoff(retry: retries, retryAfter: nil, reason: "\(error)")
        }
    }

    mutating func backoffEnded() -> Action { nextHop() }

    /// The cookie refresh is over (whether or not it found a page): the URL asked for is asked again, from the start.
    mutating func cookiesRefreshed() -> Action {
        (url, method, visited, redirects, retries) = (requested.url, requested.method, [requested.url.string], 0, 0)
        return nextHop()
    }

    /// The destination check of the current URL, unless its path cannot be sent as it is.
    private func nextHop() -> Action {
        if let problem = OriginURL.escapeProblem(Array(url.path.utf8)[...], inPath: true) {
            return .fail(OriginError.forbiddenDestination.with(problem))
        }
        return .checkDestination(url)
    }
}
