#if canImport(Glibc)
    import Glibc
#endif
import HLSCacheCore
import HLSCacheStore
import HLSKeys
import HLSOrigin
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// The HTTP server: SwiftNIO on epoll, HTTP/1.1 with keep-alive and pipelining, cache hits sent with sendfile.
package final class ProxyServer: Sendable {
    package let configuration: ProxyConfiguration
    let services: ProxyServices
    let router: ProxyRouter
    private let limiter: ConnectionLimiter
    /// What ``start()`` makes, under one lock (set once, read by ``stop()`` and tests).
    private struct Started {
        /// The listening channel.
        var channel: (any Channel)?
        /// The `Date` line of each event loop.
        var dates: DateHeaders?
        /// The requests each event loop answers without decoding (``ReplayedExchanges``).
        var replays: [ObjectIdentifier: ReplayedExchanges] = [:]
        /// Each event loop's ``LoopYield`` (large bodies written a slice at a time between the loop's other I/O).
        var yields: [ObjectIdentifier: LoopYield] = [:]
        /// ``stop()`` or ``beginShutdown()`` closed the listener (any other close is a failure).
        var closing = false
        /// The last error the listening channel saw (the one that closed it, when accept(2) failed for good).
        var listenerError: (any Error)?
    }
    private let started = NIOLockedValueBox(Started())

    /// - Parameters:
    ///   - store: the disk cache (opened by the caller so `fetch` and `serve` share the code).
    ///   - origin: the origin client, on `group`.
    ///   - keys: the key service that key URIs (every method) are rewritten to (`/keys/{keyid}`), where keys are
    ///     sealed at rest and served only to the clients `keys.allow` admits.
    ///   - metrics: where the server counts; a registry of its own by default (see ``ProxyMetrics``).
    ///   - accessLogger: the access log; by default `Logger(label: "hlscache.access")` at `logger`'s level.
    ///   - routeExtension: answers `/api/…` and `/` and observes proxied responses (the admin API, `HLSAdmin`).
    ///   - cookiePages: for a request an origin refused (401/403), the page that sets the cookies it wants when this
    ///     process read no multivariant playlist from that origin (the stream was prewarmed: its playlists are
    ///     served from the cache). The origin client's ``CookieRefresher`` asks for the multivariant playlist last
    ///     read from the request's origin, else for this.
    package init(
        configuration: ProxyConfiguration, store: CacheStore, origin: OriginClient, keys: KeyService, group: any EventLoopGroup,
        threadPool: NIOThreadPool, logger: Logger, metrics: ProxyMetrics = ProxyMetrics(), accessLogger: Logger? = nil,
        routeExtension: (any ProxyRouteExtension)? = nil, cookiePages: CookieRefresher.PageSource? = nil
    ) {
        self.configuration = configuration
        var accessLog = accessLogger ?? Logger(label: "hlscache.access")
        if accessLogger == nil { accessLog.logLevel = logger.logLevel }
        self.services = ProxyServices(
            configuration: configuration, store: store, origin: origin, keys: keys, group: group, threadPool: threadPool, logger: logger,
            metrics: metrics, accessLog: accessLog, routeExtension: routeExtension)
        self.router = ProxyRouter(services: services)
        routeExtension?.attach(to: metrics)
        self.limiter = ConnectionLimiter(limit: configuration.maxConnections)
        let playlists = services.playlists
        // The multivariant playlist last read from the request's origin comes first (``CookieRefresher``).
        origin.cookies.setPageSource { url in await cookiePages?(url) }
        origin.setHeaderSource { url in playlists.channelHeaders(for: url) }
    }

    /// Binds the listening socket. Returns the bound address (useful with port 0).
    @discardableResult
    package func start() async throws -> SocketAddress {
        let router = self.router
        let configuration = self.configuration
        let limiter = self.limiter
        let connections = services.connections
        let observer = services.observer
        let webOrigins = services.webOrigins
        let dates = DateHeaders(group: services.group)
        self.started.withLockedValue { $0.dates = dates }
        var tables: [ObjectIdentifier: ReplayedExchanges] = [:]
        let loopCount = Array(services.group.makeIterator()).count
        let headBytes = services.configuration.replayedHeadBytesPerLoop ?? ReplayedExchanges.bytesPerLoop(loops: loopCount)
        for loop in services.group.makeIterator() {
            tables[ObjectIdentifier(loop)] = ReplayedExchanges(
                eventLoop: loop, maxEntries: services.configuration.replayedHeadsPerLoop, maxBytes: headBytes)
        }
        let replays = tables
        self.started.withLockedValue { $0.replays = tables }
        var loopYields: [ObjectIdentifier: LoopYield] = [:]
        for loop in services.group.makeIterator() { loopYields[ObjectIdentifier(loop)] = try await LoopYield.make(on: loop).get() }
        let yields = loopYields
        self.started.withLockedValue { $0.yields = loopYields }
        var indices: [ObjectIdentifier: Int] = [:]
        for (index, loop) in services.group.makeIterator().enumerated() { indices[ObjectIdentifier(loop)] = index }
        let loopIndices = indices
        let metrics = services.metrics
        let logger = services.logger
        let headroom = DescriptorHeadroom()
        let bootstrap = ServerBootstrap(group: services.group)
            // Out of descriptors (`EMFILE`, `ENFILE`), accept(2) fails while the listening socket stays readable: NIO
            // called it again at once, and the server spun at full CPU serving nobody. The listener stops reading for
            // a moment after such a failure (AcceptPauseHandler: NIO's own back-off does not stop the spin), and
            // after a connection it closed because descriptors were running low.
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    var report = AcceptFailureReport()
                    let pause = AcceptPauseHandler(
                        pause: { error in
                            self.started.withLockedValue { $0.listenerError = error }
                            metrics.acceptBackedOff()
                            if let line = report.failed(error, now: .now()) { logger.warning("\(line)") }
                            return ProxyServer.acceptPause
                        },
                        // Descriptors running low: a connection is closed before it can take the last ones
                        // (DescriptorHeadroom), and accepting pauses as it does when accept(2) fails.
                        refuse: {
                            guard let headroom, !headroom.hasRoom() else { return nil }
                            metrics.refusedForDescriptors()
                            if let line = headroom.refused(now: .now()) { logger.warning("\(line)") }
                            return ProxyServer.acceptPause
                        })
                    try channel.pipeline.syncOperations.addHandler(pause)
                }
            }
            .serverChannelOption(.backlog, value: 1024)
            // One accept(2) per readiness (nginx's default, `multi_accept off`): NIO's batch of four went on accepting
            // after AcceptPauseHandler turned a connection away for want of descriptors, while the connections it
            // closed were still open on their own loops, and the last accept of the batch failed with EMFILE.
            .serverChannelOption(.maxMessagesPerRead, value: 1)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(
                .socketOption(NIOBSDSocket.Option(rawValue: SO_REUSEPORT)), value: configuration.listenSharing == .exclusive ? 0 : 1
            )
            // TCP level: `.socketOption(.tcp_nodelay)` would be SOL_SOCKET's option 1, SO_DEBUG, which needs
            // CAP_NET_ADMIN, which a container started with `--cap-drop ALL` lacks: every connection would be reset.
            .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
            .childChannelOption(.maxMessagesPerRead, value: 4)
            // Nothing here paces on writability (streamed bodies wait for each write's future), and a cached
            // segment handed to sendfile counts as pending bytes: with NIO's 64 KiB default every hit flipped the
            // channel unwritable and back, two pipeline events per request.
            .childChannelOption(.writeBufferWaterMark, value: .init(low: 32 << 20, high: 64 << 20))
            .childChannelInitializer { channel in
                guard limiter.acquire() else {
                    return channel.close()
                }
                channel.closeFuture.whenComplete { _ in limiter.release() }
                // Accepted after a shutdown began: close at once.
                guard connections.add(channel) else { return channel.close() }
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    let timeouts = ConnectionTimeoutHandler(
                        headTimeout: configuration.requestHeadTimeout, bodyTimeout: configuration.requestBodyTimeout,
                        sendTimeout: configuration.sendTimeout, idleTimeout: configuration.idleTimeout,
                        clock: configuration.connectionClock)
                    try sync.addHandler(timeouts)
                    // No HTTPServerPipelineHandler, HTTPResponseEncoder or error handler: ProxyHTTPHandler queues
                    // pipelined requests, answers decoder errors and writes the response bytes itself. Every
                    // header value we send is either ours or came through AsyncHTTPClient's parser (no CR/LF
                    // possible), and a CORS value is an Origin the policy matched.
                    // NIO's HTTPRequestDecoder, kept decoding after a request that asks for an upgrade (RequestDecoder).
                    let decoder = RequestDecoder()
                    try sync.addHandler(ByteToMessageHandler(decoder))
                    let handler = ProxyHTTPHandler(
                        router: router, configuration: configuration, observer: observer, timeouts: timeouts, decoder: decoder,
                        date: dates.line(for: channel.eventLoop), replays: replays[ObjectIdentifier(channel.eventLoop)],
                        yield: yields[ObjectIdentifier(channel.eventLoop)], webOrigins: webOrigins,
                        loopIndex: loopIndices[ObjectIdentifier(channel.eventLoop)] ?? 0)
                    decoder.replayer = handler
                    timeouts.replayFront = decoder
                    try sync.addHandler(handler)
                }
            }
        if configuration.listenSharing == .shareable, configuration.port != 0 {
            // SO_REUSEPORT would let this socket join one already there: a plain bind first refuses a taken address.
            try Self.refuseTakenAddress(host: configuration.host, port: configuration.port)
        }
        let channel = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        self.started.withLockedValue { $0.channel = channel }
        if let bound = channel.localAddress, let ip = bound.ipAddress, let port = bound.port {
            services.origin.addOwnListener(host: ip, port: port)
        }
        services.logger.info("hlscache listening on \(channel.localAddress?.description ?? "?")")
        return channel.localAddress!
    }

    /// Throws `EADDRINUSE` when another socket listens on `host:port`: a plain bind (`SO_REUSEADDR`, not `SO_REUSEPORT`)
    /// of a socket that is closed at once. It never listens: the probe this replaced was a listening server channel,
    /// and a client connecting in its instant (a readiness check polling a starting server) was accepted by it and
    /// never answered — its connection outlived the probe with no handler (1 start in 40 under load).
    static func refuseTakenAddress(host: String, port: Int) throws {
        let address = try SocketAddress.makeAddressResolvingHost(host, port: port)
        let descriptor = socket(address.protocol.rawValue, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw IOError(errnoCode: errno, reason: "socket") }
        defer { close(descriptor) }
        var one: CInt = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size))
        let bound = address.withSockAddr { bind(descriptor, $0, socklen_t($1)) }
        guard bound == 0 else { throw IOError(errnoCode: errno, reason: "bind(\(host):\(port))") }
    }

    /// Requests answered so far without being decoded, on every event loop. For tests (`@testable`): a replayed
    /// exchange is answered with the bytes the decoded path would send, so nothing else tells it apart.
    /// `onEarlierCheck`: only those sent on the check of an earlier one (``ReplayCheck``).
    func replayedRequests(onEarlierCheck: Bool = false) async throws -> Int {
        var total = 0
        for loop in services.group.makeIterator() {
            guard let table = started.withLockedValue({ $0.replays[ObjectIdentifier(loop)] }) else { continue }
            total += try await loop.submit { onEarlierCheck ? table.replayedOnCheck : table.replayed }.get()
        }
        return total
    }

    /// The estimated memory of the heads remembered, per event loop (``ReplayedExchanges/bytes``; tests).
    func replayedHeadBytes() async throws -> [Int] {
        var bytes: [Int] = []
        for loop in services.group.makeIterator() {
            guard let table = started.withLockedValue({ $0.replays[ObjectIdentifier(loop)] }) else { continue }
            bytes.append(try await loop.submit { table.bytes }.get())
        }
        return bytes
    }

    /// The listening channel, once started.
    var listener: (any Channel)? { started.withLockedValue { $0.channel } }

    /// The bound address, once started.
    /// Replaces `http.allowedWebOrigins`: every request from now on, on new and open connections, is judged by
    /// `policy` (a reload; docs/operations.md#reload).
    package func setWebOrigins(_ policy: WebOriginPolicy) {
        services.webOrigins.set(policy)
    }

    package var localAddress: SocketAddress? { started.withLockedValue { $0.channel?.localAddress } }

    /// Stops accepting connections; in-flight responses finish on their own (with the last `Date` written).
    package func stop() async throws {
        let channel = closingListener()
        stopDates()
        try await channel?.close()
    }

    /// Stops renewing the `Date` lines and closes the loops' yield pipes (the server is done).
    func stopDates() {
        started.withLockedValue { $0.dates }?.stop()
        let yields = started.withLockedValue { started in
            defer { started.yields = [:] }
            return started.yields
        }
        for yield in yields.values { yield.close().whenComplete { _ in } }
    }

    /// Runs until the listening channel closes.
    ///
    /// - Throws: ``ListenerClosed`` when the listener closed without ``stop()`` or ``beginShutdown()``: NIO closes a
    ///   listening channel whose accept(2) fails with anything but a shortage (`EMFILE`, `ENFILE`, `ENOBUFS`,
    ///   `ENOMEM`) or `ECONNABORTED`, and a server that no longer accepts must not look alive.
    package func waitUntilClosed() async throws {
        let channel = started.withLockedValue { $0.channel }
        try await channel?.closeFuture.get()
        let (closing, error) = started.withLockedValue { ($0.closing, $0.listenerError) }
        if !closing { throw ListenerClosed(cause: error) }
    }

    /// The listener, marked as closed on purpose (``stop()``, ``beginShutdown()``).
    func closingListener() -> (any Channel)? {
        started.withLockedValue {
            $0.closing = true
            return $0.channel
        }
    }

    /// The listening socket closed while the server was not stopping.
    package struct ListenerClosed: Error, CustomStringConvertible {
        package var cause: (any Error)?
        package var description: String {
            "the listening socket closed unexpectedly" + (cause.map { " after accept(2) failed: \($0)" } ?? "")
        }
    }

    /// Open client connections.
    package var openConnections: Int { limiter.current }

    /// How long accepting pauses after accept(2) failed (out of descriptors): short enough that a connection closing
    /// meanwhile is soon followed by the next accept, long enough that the failing call is not a busy loop.
    static let acceptPause = TimeAmount.milliseconds(200)

    /// The client connections this server holds at most (`limits.maxConnections`, as given).
    package var maxConnections: Int { limiter.limit }
}
