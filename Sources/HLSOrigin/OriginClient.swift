import AsyncHTTPClient
import HLSCacheCore
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Fetches from origins for the proxy and the prewarmer: streaming with backpressure, redirects followed
/// here (so the destination policy sees every hop), transient failures retried before the head.
///
/// Runs on the server's `EventLoopGroup`; `stream` can be called from a channel handler and calls its
/// handler back on the event loop it is given.
package final class OriginClient: Sendable {
    /// The settings this client was made with.
    package let configuration: OriginConfiguration
    /// The cookies origins set, sent back to them (`nil` when ``OriginConfiguration/keepsCookies`` is off).
    /// Whether the cookies origins set are kept and sent back (``OriginConfiguration/keepsCookies``; the jar is in
    /// the client's state).
    package var keepsCookies: Bool { configuration.keepsCookies }
    /// How many cookies the jar holds; nil when cookies are not kept.
    package var cookieCount: Int? { state.withLock { $0.cookieJar?.count } }
    private let httpClient: HTTPClient
    /// Requests in flight per origin host (``OriginConfiguration/maxConnectionsPerHost``).
    private let slots: OriginConnectionSlots
    /// Steps of origin requests that ran in a Swift `Task` (name resolutions, cookie refreshes, raw connects): the
    /// rest runs as event-loop callbacks (``OriginRequestDriver``). For tests and diagnostics.
    private let asyncSteps = Atomic<Int>(0)
    package var asyncStepCount: Int { asyncSteps.load(ordering: .relaxed) }
    /// Counts one step run in a Swift task.
    func countAsyncStep() { asyncSteps.add(1, ordering: .relaxed) }
    let eventLoopGroup: any EventLoopGroup
    let logger: Logger
    /// The most hosts remembered.
    private static let maxRememberedHosts = 1024

    /// What the client keeps in memory and may change while it runs, under one lock (short steps only: nothing is
    /// called out while it is held).
    private struct State {
        /// Host → addresses and until when they may be reused (``OriginConfiguration/resolutionTTL``); the least
        /// recently used hosts go beyond ``maxRememberedHosts``.
        var resolutions = BoundedLRU<String, (addresses: [OriginIPAddress], until: ContinuousClock.Instant)>(
            maxCount: OriginClient.maxRememberedHosts)
        /// The per-origin headers and cookies sent: ``OriginConfiguration/originHeaders`` and
        /// ``OriginConfiguration/originCookies`` until ``setOriginFields(headers:cookies:)`` replaces them (a reload).
        var originHeaders: [String: [OriginConfiguration.Field]]
        var originCookies: [String: [OriginConfiguration.Field]]
        /// See ``setHeaderSource(_:)``.
        var headerSource: HeaderSource?
        /// The addresses and ports a server of this process listens on: never an origin (a proxied URL naming the
        /// proxy itself would make it fetch from itself, its admin API and keys included, and nest without end).
        var ownListeners: [(address: OriginIPAddress?, port: Int)] = []
        /// The TLS context of raw exchanges (``OriginRawExchange``), made on first use.
        var rawTLSContext: NIOSSLContext?
        /// The cookies origins set (nil when ``OriginConfiguration/keepsCookies`` is off).
        var cookieJar: OriginCookieJar?
    }
    private let state: Mutex<State>

    /// Lets requests refused for want of a cookie get one, as a player would, and coalesces the refreshes of those
    /// pages (the proxy's and the downloader's). With cookies kept (``OriginConfiguration/keepsCookies``) and a page
    /// source set (``CookieRefresher/setPageSource(_:)``), a 401 or 403 is not delivered at once: the page
    /// ``CookieRefresher/page(for:)`` names is fetched (its body discarded, its cookies kept; at most once per
    /// ``OriginConfiguration/cookieRefreshInterval`` per page) and the request made again, once; that answer is
    /// delivered whatever it is. A URL no page is known for is asked again once too.
    package let cookies = CookieRefresher()
    /// Request headers for a URL on top of the configured ones (the proxy's: those an IPTV list's `#EXTVLCOPT`
    /// names for a channel and what is reached from it). See ``setHeaderSource(_:)``.
    package typealias HeaderSource = @Sendable (OriginURL) -> [(String, String)]
    /// Names this process in the `Via` header of every origin request (`1.1 hlscache-…`), so a request that comes back
    /// to the server that sent it is recognised (the loop detection of Varnish and Squid).
    package let instanceToken: String

    /// Creates a client sharing `eventLoopGroup`; call `shutdown()` before the group shuts down.
    package init(eventLoopGroup: any EventLoopGroup, configuration: OriginConfiguration = OriginConfiguration(), logger: Logger) {
        self.configuration = configuration
        self.state = Mutex(
            State(
                originHeaders: configuration.originHeaders, originCookies: configuration.originCookies,
                cookieJar: configuration.keepsCookies ? OriginCookieJar() : nil))
        self.eventLoopGroup = eventLoopGroup
        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        self.instanceToken = "hlscache-" + String(repeating: "0", count: 16 - random.count) + random
        // AsyncHTTPClient logs every request and response part at trace level, bodies in hex and headers in full:
        // AES-128 keys and origin credentials would end up in the log. Its logs stop at debug.
        var logger = logger
        if logger.logLevel < .debug { logger.logLevel = .debug }
        self.logger = logger
        var http = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            // The read timeout is the attempt delegate's: AsyncHTTPClient's would also run while a stream handler holds
            // the body back.
            timeout: .init(connect: configuration.connectTimeout, read: nil),
            proxy: configuration.proxy,
            decompression: .disabled
        )
        http.httpVersion = .automatic
        if let file = configuration.extraTrustRootsFile {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.additionalTrustRoots = [.file(file)]
            http.tlsConfiguration = tls
        }
        // AHC would otherwise keep retrying a refused connection until the connect timeout, so a dead origin
        // took connectTimeout × attempts to report; the client's own bounded retries replace it.
        http.connectionPool.retryConnectionEstablishment = false
        // The pool holds as many connections per host as requests may be in flight to it; requests beyond that wait
        // in `slots`, under a limit of their own, instead of in the pool, where the connect timeout bounds the wait.
        http.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = max(1, configuration.maxConnectionsPerHost)
        self.slots = OriginConnectionSlots(limit: configuration.maxConnectionsPerHost, waitLimit: configuration.connectionWaitTimeout)
        self.httpClient = HTTPClient(eventLoopGroupProvider: .shared(eventLoopGroup), configuration: http, backgroundActivityLogger: logger)
    }

    /// Fetches `page` for the cookies its answer sets (the body is discarded), sharing a refresh of it under way or
    /// started within `interval` (by default ``OriginConfiguration/cookieRefreshInterval``).
    package func refreshCookies(
        from page: OriginURL, headers: [(String, String)] = [], maxBytes: Int = 16 << 20, within interval: Duration? = nil
    ) async {
        await cookies.refresh(page, within: interval ?? configuration.cookieRefreshInterval) {
            _ = try? await self.fetch(page, headers: headers, maxBytes: maxBytes, refreshingCookies: false)
        }
    }

    /// Adds the headers `source` gives for a URL to every request for it (after the configured headers of its
    /// origin, before the request's own): how the proxy sends the `User-Agent` and `Referer` an IPTV channel list
    /// names for a channel (`#EXTVLCOPT:http-user-agent=…`) with the requests of that channel.
    package func setHeaderSource(_ source: HeaderSource?) {
        state.withLock { $0.headerSource = source }
    }

    /// Tells the client that a server of this process listens at `host:port` (`0.0.0.0` or `::` for every local
    /// address): requests to it are refused with ``OriginError/forbiddenDestination``.
    package func addOwnListener(host: String, port: Int) {
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let address = OriginIPAddress(bare)
        var entries: [(address: OriginIPAddress?, port: Int)] = []
        if let address, address.kind == .unroutable {
            // A wildcard: every address of this machine (loopback, and each interface's).
            entries.append((nil, port))
        } else {
            entries.append((address, port))
        }
        state.withLock { $0.ownListeners += entries }
    }

    /// Whether `address:port` is one this process listens on.
    func isOwnListener(_ address: OriginIPAddress, port: Int) -> Bool {
        let listeners = state.withLock { $0.ownListeners }
        guard !listeners.isEmpty else { return false }
        let target = address.embeddedIPv4 ?? address
        for listener in listeners where listener.port == port {
            if let own = listener.address {
                if (own.embeddedIPv4 ?? own) == target { return true }
            } else if target.kind == .loopback || target.kind == .unroutable || Self.localAddresses().contains(target) {
                return true
            }
        }
        return false
    }

    /// The addresses of this machine's interfaces.
    static func localAddresses() -> Set<OriginIPAddress> {
        var found: Set<OriginIPAddress> = []
        guard let devices = try? System.enumerateDevices() else { return found }
        for device in devices {
            if let text = device.address?.ipAddress, let address = OriginIPAddress(text) { found.insert(address.embeddedIPv4 ?? address) }
        }
        return found
    }

    /// How often requests waited for a connection to their host, for `/metrics`.
    package var connectionWaits: (waits: Int, timeouts: Int, waiting: Int) {
        let statistics = slots.statistics
        return (statistics.waits, statistics.timeouts, statistics.waiting)
    }

    /// Cancels what is in flight and closes all connections.
    package func shutdown() async throws {
        try await httpClient.shutdown()
    }

    /// Starts a request whose response streams into `handler` on `eventLoop` (default: one of the group's).
    ///
    /// - Parameters:
    ///   - headers: request headers such as `Range` or `If-None-Match`; they replace same-named configured
    ///     origin headers. `Host` and connection headers are ignored.
    /// - Returns: the task, to cancel it or wait for it.
    @discardableResult
    package func stream(
        _ url: OriginURL,
        method: OriginMethod = .GET,
        headers: [(String, String)] = [],
        on eventLoop: (any EventLoop)? = nil,
        handler: some OriginStreamHandler
    ) -> OriginTask {
        stream(url, method: method, headers: headers, on: eventLoop, refreshingCookies: true, handler: handler)
    }

    /// ``stream(_:method:headers:on:handler:)``; `refreshingCookies: false` delivers a 401/403 as it is (the fetch of
    /// a cookie source's page itself).
    func stream(
        _ url: OriginURL,
        method: OriginMethod,
        headers: [(String, String)],
        on eventLoop: (any EventLoop)?,
        refreshingCookies: Bool,
        handler: some OriginStreamHandler
    ) -> OriginTask {
        let task = OriginTask(eventLoop: eventLoop ?? eventLoopGroup.next(), handler: handler)
        let machine = OriginRequestStateMachine(
            url: url, method: method, mayRefreshCookies: refreshingCookies && keepsCookies && cookies.isEnabled,
            maxRedirects: configuration.maxRedirects, maxRetries: configuration.retry.maxRetries)
        OriginRequestDriver(client: self, task: task, headers: headers.map { (name: $0.0, value: $0.1) }, machine: machine).start()
        return task
    }

    /// How long to wait before retry number `retry`: the policy's delay, or the origin's `Retry-After` if longer, up to
    /// the policy's longest delay (a client is waiting on this).
    func backoffDelay(_ retry: Int, retryAfter: Duration?) -> TimeAmount {
        var delay = Duration.nanoseconds(max(0, configuration.retry.delay(beforeRetry: retry).nanoseconds))
        if let retryAfter { delay = max(delay, min(retryAfter, .nanoseconds(configuration.retry.maxDelay.nanoseconds))) }
        let (seconds, attoseconds) = delay.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// What the destination check of a URL needs: nothing more (its addresses are remembered, or no name to resolve),
    /// or a resolution of its host first.
    enum DestinationCheck {
        case allowed([OriginIPAddress])
        case refused(OriginError)
        case needsResolution
    }

    /// The destination check of `url` as far as it goes without resolving a name: ``DestinationCheck/needsResolution``
    /// when the host's addresses are not remembered (then ``checkDestination(_:)`` resolves them).
    func checkRememberedDestination(_ url: OriginURL) -> DestinationCheck {
        let bareHost = Self.bareHost(url)
        guard configuration.destinationPolicy.allowsHost(url.host) || configuration.destinationPolicy.allowsHost(bareHost) else {
            return .refused(OriginError.forbiddenDestination.with("\(url.host) is not in the allowed hosts"))
        }
        var addresses = rememberedAddresses(of: bareHost)
        // A numeric host resolves to itself: the system resolver is not asked.
        if addresses == nil, configuration.resolver is SystemHostResolver, let literal = OriginIPAddress(bareHost) { addresses = [literal] }
        guard let addresses else { return .needsResolution }
        do {
            try judge(addresses, of: url)
            return .allowed(addresses)
        } catch {
            return .refused(error)
        }
    }

    /// The host of `url` without IPv6 brackets or the dot of a fully qualified name.
    private static func bareHost(_ url: OriginURL) -> String {
        var bareHost = url.host.hasPrefix("[") ? String(url.host.dropFirst().dropLast()) : url.host
        // `127.0.0.1.` or `example.com.`: a fully qualified name is the same host (the policy judges it without the
        // dot; the resolver would refuse a numeric address written so).
        if bareHost.hasSuffix("."), bareHost.count > 1 { bareHost.removeLast() }
        return bareHost
    }

    /// Applies the destination policy to the host and to every address it resolves to; returns those addresses
    /// (none behind an upstream proxy that resolves names itself).
    func checkDestination(_ url: OriginURL) async throws(OriginError) -> [OriginIPAddress] {
        let policy = configuration.destinationPolicy
        let bareHost = Self.bareHost(url)
        guard policy.allowsHost(url.host) || policy.allowsHost(bareHost) else {
            throw OriginError.forbiddenDestination.with("\(url.host) is not in the allowed hosts")
        }
        let addresses: [OriginIPAddress]
        if let remembered = rememberedAddresses(of: bareHost) {
            addresses = remembered
        } else {
            do {
                addresses = try await configuration.resolver.resolve(host: bareHost)
            } catch {
                // Behind an upstream proxy the proxy resolves; the local resolver may know nothing of the name.
                if configuration.proxy != nil { return [] }
                throw OriginError.network.with("\(error)")
            }
            remember(addresses, of: bareHost)
        }
        try judge(addresses, of: url)
        return addresses
    }

    /// Refuses addresses the policy does not allow, and this server's own listeners.
    private func judge(_ addresses: [OriginIPAddress], of url: OriginURL) throws(OriginError) {
        let policy = configuration.destinationPolicy
        for address in addresses where !policy.allowsAddress(address) {
            throw OriginError.forbiddenDestination.with("\(url.host) resolves to \(address) (\(address.kind.rawValue))")
        }
        for address in addresses where isOwnListener(address, port: url.effectivePort) {
            throw OriginError.forbiddenDestination.with("\(url.authority) is this server itself")
        }
    }

    private func rememberedAddresses(of host: String) -> [OriginIPAddress]? {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard let entry = state.resolutions.value(forKey: host), entry.until > now else { return nil }
            return entry.addresses
        }
    }

    private func remember(_ addresses: [OriginIPAddress], of host: String) {
        let ttl = configuration.resolutionTTL
        guard ttl > .zero, !addresses.isEmpty else { return }
        let now = ContinuousClock.now
        state.withLock { state in
            _ = state.resolutions.setValue((addresses, now + ttl), forKey: host)
        }
    }

    /// One HTTP exchange: through AsyncHTTPClient, or as a raw exchange when AsyncHTTPClient would not send the path
    /// as written (``OriginRawExchange``). Runs on the task's event loop; the future is the attempt's outcome.
    func attempt(
        url: OriginURL,
        method: OriginMethod,
        headers: [OriginConfiguration.Field],
        addresses: [OriginIPAddress],
        retryStatuses: Bool,
        retryAuthorization: Bool,
        task: OriginTask
    ) -> EventLoopFuture<OriginAttemptOutcome> {
        let eventLoop = task.eventLoop
        let raw = OriginRawExchange.isNeeded(for: url)
        if raw, configuration.proxy != nil {
            return eventLoop.makeFailedFuture(
                OriginError.network.with(
                    "the path has percent escapes that do not decode to UTF-8 text or characters such as [ ] | { } that URL types escape; such a path is sent as written on a direct connection only, not through the upstream proxy"
                ))
        }
        let request: HTTPClient.Request?
        do {
            request =
                raw
                ? nil
                : try HTTPClient.Request(
                    url: url.string, method: method == .GET ? .GET : .HEAD, headers: requestHeaders(for: url, extra: headers))
        } catch {
            return eventLoop.makeFailedFuture(error)
        }
        // One slot per request on the wire, given back when the transport is done with it (the body read or the
        // request failed), not when the head is delivered: the connection stays busy until then. Taken before the
        // delegate exists: its promise must be completed once made.
        let host = "\(url.scheme)://\(url.authority.lowercased())"
        let cookieStore: (@Sendable ([String], OriginURL) -> Void)? =
            keepsCookies ? { @Sendable [self] setCookie, from in storeCookies(setCookie, from: from) } : nil
        let slot = slots.acquire(host, on: eventLoop)
        task.attach(abort: { slot.cancel() })
        return slot.future.flatMapError { [logger] error in
            if let error = error as? OriginError {
                logger.notice("origin connections busy", metadata: ["url": "\(url.redacted)", "reason": "\(error.detail)"])
            }
            return eventLoop.makeFailedFuture(error)
        }.flatMap { [self, slots] () -> EventLoopFuture<OriginAttemptOutcome> in
            guard !task.isFinished else {
                // Cancelled while the slot came.
                slots.release(host)
                return eventLoop.makeFailedFuture(OriginError.cancelled)
            }
            let delegate = OriginAttemptDelegate(
                url: url, method: method, retryStatuses: retryStatuses, retryAuthorization: retryAuthorization, task: task,
                storeCookies: cookieStore, readTimeout: configuration.readTimeout)
            guard let request else {
                startRawExchange(
                    url: url, method: method, headers: headers, addresses: addresses, host: host, delegate: delegate, task: task)
                return delegate.futureOutcome
            }
            let requestTask = httpClient.execute(request: request, delegate: delegate, eventLoop: .delegate(on: eventLoop), logger: logger)
            requestTask.futureResult.whenComplete { [slots] _ in slots.release(host) }
            task.attach(request: requestTask)
            return delegate.futureOutcome
        }
    }

    /// Connects and sends a raw exchange (``OriginRawExchange``); its outcome comes through `delegate`. A Swift task of
    /// its own: raw exchanges are for the rare paths AsyncHTTPClient would rewrite.
    private func startRawExchange(
        url: OriginURL, method: OriginMethod, headers: [OriginConfiguration.Field], addresses: [OriginIPAddress], host: String,
        delegate: OriginAttemptDelegate, task: OriginTask
    ) {
        countAsyncStep()
        let connecting = Task {
            do {
                let exchange = try await OriginRawExchange.start(
                    url: url, method: method, headers: requestHeaders(for: url, extra: headers), addresses: addresses,
                    tls: url.scheme == "https" ? try rawTLS() : nil, connectTimeout: configuration.connectTimeout,
                    delegate: delegate, on: task.eventLoop)
                exchange.closeFuture.whenComplete { [slots] _ in slots.release(host) }
                task.attach(abort: { exchange.cancel() })
            } catch {
                slots.release(host)
                task.eventLoop.execute { delegate.failed(error) }
            }
        }
        task.attach(abort: { connecting.cancel() })
    }

    /// Whether a request for `url` goes out on a raw exchange rather than through AsyncHTTPClient.
    package static func needsRawExchange(_ url: OriginURL) -> Bool {
        OriginRawExchange.isNeeded(for: url)
    }

    /// The client TLS context of raw exchanges: the system's trust roots and the configured extra ones, HTTP/1.1.
    private func rawTLS() throws -> NIOSSLContext {
        try state.withLock { state in
            if let context = state.rawTLSContext { return context }
            var tls = TLSConfiguration.makeClientConfiguration()
            if let file = configuration.extraTrustRootsFile { tls.additionalTrustRoots = [.file(file)] }
            tls.applicationProtocols = ["http/1.1"]
            let made = try NIOSSLContext(configuration: tls)
            state.rawTLSContext = made
            return made
        }
    }

    /// Keeps the cookies of `setCookie` (a response's `Set-Cookie` values) received from `url`.
    func storeCookies(_ setCookie: [String], from url: OriginURL) {
        state.withLock { $0.cookieJar?.store(setCookie, from: url) }
    }

    /// Replaces the per-origin headers and cookies (keyed like ``OriginConfiguration/originHeaders``): requests
    /// started from now on send these (a reload; docs/operations.md#reload).
    package func setOriginFields(headers: [String: [OriginConfiguration.Field]], cookies: [String: [OriginConfiguration.Field]]) {
        state.withLock { ($0.originHeaders, $0.originCookies) = (headers, cookies) }
    }

    private static let ignoredRequestHeaders: Set<String> = ["host", "connection", "transfer-encoding", "keep-alive", "upgrade", "te"]

    /// User-Agent, then the origin's configured headers, those of the header source and cookies, then the request's own headers
    /// (which replace configured ones of the same name), and `Accept-Encoding: identity` unless one of them
    /// asked for another coding.
    func requestHeaders(for url: OriginURL, extra: [OriginConfiguration.Field]) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "User-Agent", value: configuration.userAgent)
        let (source, originHeaders, originCookies) = state.withLock { ($0.headerSource, $0.originHeaders, $0.originCookies) }
        let sourced = source.map { $0(url).map { (name: $0.0, value: $0.1) } } ?? []
        let configured = OriginConfiguration.extraHeaders(for: url, headers: originHeaders, cookies: originCookies)
        for field in configured + sourced + extra {
            guard !Self.ignoredRequestHeaders.contains(field.name.lowercased()) else { continue }
            headers.replaceOrAdd(name: field.name, value: field.value)
        }
        // Cookies the origin set earlier, unless the configuration or the caller already sends one of that name.
        if keepsCookies, state.withLock({ ($0.cookieJar?.count ?? 0) > 0 }) {
            let sent = headers["Cookie"].joined(separator: "; ")
            let taken = Set(
                sent.split(separator: ";").compactMap { $0.split(separator: "=", maxSplits: 1).first?.trimmingCharacters(in: .whitespaces) }
            )
            let stored = state.withLock { $0.cookieJar?.cookies(for: url, excluding: taken) } ?? []
            if !stored.isEmpty {
                let value = ([sent] + stored.map { "\($0.name)=\($0.value)" }).filter { !$0.isEmpty }.joined(separator: "; ")
                headers.replaceOrAdd(name: "Cookie", value: value)
            }
        }
        // Without the header any coding is acceptable (RFC 9110 §12.5.3); segments and ranges are asked for as
        // they are, so a range means the same bytes as in the file. Whatever coding arrives is still decoded.
        if !headers.contains(name: "Accept-Encoding") { headers.add(name: "Accept-Encoding", value: "identity") }
        headers.replaceOrAdd(name: "Via", value: "1.1 \(instanceToken)")
        return headers
    }

    /// The request header a caller adds for a body worth compressing (playlists): the origin may send it
    /// gzipped, and the client decodes it before the caller sees it.
    package static let acceptCompressed = ("Accept-Encoding", "gzip, deflate")
}
