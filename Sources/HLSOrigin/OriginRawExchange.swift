import AsyncHTTPClient
import HLSCacheCore
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL

#if canImport(FoundationEssentials)
    import struct FoundationEssentials.URL
#else
    import struct Foundation.URL
#endif

/// One HTTP/1.1 exchange on a connection of its own, for the requests AsyncHTTPClient cannot send as written.
///
/// The proxy forwards a path as the octets the player sent. AsyncHTTPClient takes the request line from
/// Foundation's `URL`, whose decoded `path` is empty when the percent escapes do not decode to UTF-8 (`/caf%E9.ts`,
/// swift-corelibs-foundation issue 3353), and then sends `GET /`: another resource. Those requests go here instead: the
/// request line is the path and query exactly as given, over plain TCP or TLS (certificate verification as
/// AsyncHTTPClient's, the configured extra trust roots included), `Connection: close`, to the addresses the
/// destination check just approved. Responses reach the same ``OriginAttemptDelegate`` as AsyncHTTPClient's, with
/// the same backpressure: the next read waits until the delegate took the last part. Rare, so not pooled. Paths and
/// queries with characters Foundation's `URL` would escape (`[`, `]`, `|`, `^`, `` ` ``, `{`, `}`) go here too.
final class OriginRawExchange: Sendable {
    /// Whether AsyncHTTPClient would send another request line than `url`'s path and query.
    static func isNeeded(for url: OriginURL) -> Bool {
        // `[`, `]`, `|`, `^`, `` ` ``, `{`, `}`: Foundation's URL escapes them (`%5B`), another path to an origin
        // that matches paths literally.
        if url.hasLiteralUnsafeCharacters { return true }
        guard url.path.utf8.contains(UInt8(ascii: "%")) else { return false }
        guard let parsed = URL(string: url.string) else { return true }
        return parsed.path.isEmpty && url.path != ""
    }

    /// What NIO's outbound validator checks, but for the request target only what the wire cannot carry: header
    /// names are tokens, values hold no control character but tab, and the target is visible ASCII (no space, no
    /// control, nothing above 0x7E: ``OriginURL`` escaped those).
    static func isSendable(_ head: HTTPRequestHead) -> Bool {
        guard head.uri.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        for (name, value) in head.headers {
            guard !name.isEmpty, name.utf8.allSatisfy(isTokenByte),
                value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) })
            else { return false }
        }
        return true
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default: return false
        }
    }

    private let channel: any Channel

    private init(channel: any Channel) {
        self.channel = channel
    }

    /// Completes when the connection closed, whatever the outcome.
    var closeFuture: EventLoopFuture<Void> { channel.closeFuture }

    /// Ends the exchange; the delegate is told through ``OriginAttemptDelegate/failed(_:)`` unless it already finished.
    func cancel() {
        channel.pipeline.fireErrorCaught(HTTPClientError.cancelled)
    }

    /// Connects to the first of `addresses` that answers (the host name when there are none) and sends the request.
    /// Fails (before anything reached the delegate) when no connection could be made.
    static func start(
        url: OriginURL,
        method: OriginMethod,
        headers: HTTPHeaders,
        addresses: [OriginIPAddress],
        tls: NIOSSLContext?,
        connectTimeout: TimeAmount,
        delegate: OriginAttemptDelegate,
        on eventLoop: any EventLoop
    ) async throws -> OriginRawExchange {
        var head = HTTPRequestHead(
            version: .http1_1, method: method == .GET ? .GET : .HEAD,
            uri: url.path.isEmpty ? "/" : url.path + (url.query.map { "?" + $0 } ?? ""))
        head.headers = headers
        head.headers.replaceOrAdd(name: "Host", value: url.authority)
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        guard isSendable(head) else {
            throw OriginError.network.with("a request header or the request target holds a character HTTP cannot carry")
        }
        let bareHost = url.host.hasPrefix("[") ? String(url.host.dropFirst().dropLast()) : url.host
        let serverName = OriginIPAddress(bareHost) == nil ? bareHost : nil
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.autoRead, value: false)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: serverName))
                    }
                    // NIO's outbound validator refuses `^`, `` ` ``, `{`, `|`, `}` in the request target, which this
                    // exchange exists to send as written; the head is checked here instead (``isSendable(_:)``).
                    try channel.pipeline.syncOperations.addHTTPClientHandlers(enableOutboundHeaderValidation: false)
                    try channel.pipeline.syncOperations.addHandler(RawExchangeHandler(head: head, delegate: delegate))
                }
            }
        var lastError: (any Error)?
        let targets: [(host: String, port: Int)] =
            addresses.isEmpty
            ? [(bareHost, url.effectivePort)] : addresses.map { ("\($0)", url.effectivePort) }
        for target in targets {
            do {
                let channel = try await bootstrap.connect(host: target.host, port: target.port).get()
                return OriginRawExchange(channel: channel)
            } catch {
                lastError = error
            }
        }
        throw lastError ?? OriginError.network.with("no address to connect to for \(url.host)")
    }
}

/// Writes the request when the connection is up and feeds the response to the delegate one part at a time.
private final class RawExchangeHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    private enum Event {
        case part(HTTPClientResponsePart)
        /// The connection closed (after any part the decoder still had).
        case closed
    }

    private let head: HTTPRequestHead
    private let delegate: OriginAttemptDelegate
    /// Parts decoded but not yet taken: one read can bring several, the delegate takes one at a time.
    private var queue = CircularBuffer<Event>()
    /// A body part is with the delegate; nothing else is handed on until its future completes.
    private var delivering = false
    /// The delegate was told the end or a failure.
    private var done = false

    init(head: HTTPRequestHead, delegate: OriginAttemptDelegate) {
        self.head = head
        self.delegate = delegate
    }

    func channelActive(context: ChannelHandlerContext) {
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        let channel = context.channel
        delegate.sent(abort: { error in channel.pipeline.fireErrorCaught(error) })
        context.read()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        queue.append(.part(unwrapInboundIn(data)))
        drain(context: context)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        readIfIdle(context: context)
        context.fireChannelReadComplete()
    }

    func channelInactive(context: ChannelHandlerContext) {
        queue.append(.closed)
        drain(context: context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error, context: context)
    }

    private func fail(_ error: any Error, context: ChannelHandlerContext) {
        queue.removeAll()
        if !done {
            done = true
            delegate.failed(error)
        }
        context.close(promise: nil)
    }

    /// Hands queued parts to the delegate until one is being taken or the queue is empty.
    private func drain(context: ChannelHandlerContext) {
        while !delivering, !done, let event = queue.popFirst() {
            switch event {
            case .part(.head(let head)):
                _ = delegate.received(head: head)
            case .part(.body(let buffer)):
                delivering = true
                let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
                delegate.received(part: buffer).hop(to: context.eventLoop).whenComplete { result in
                    let (handler, context) = bound.value
                    handler.delivering = false
                    switch result {
                    case .success:
                        handler.drain(context: context)
                        handler.readIfIdle(context: context)
                    case .failure(let error):
                        handler.fail(error, context: context)
                    }
                }
            case .part(.end):
                done = true
                delegate.finished()
                context.close(promise: nil)
            case .closed:
                fail(HTTPClientError.remoteConnectionClosed, context: context)
            }
        }
    }

    private func readIfIdle(context: ChannelHandlerContext) {
        guard !delivering, !done, queue.isEmpty, context.channel.isActive else { return }
        context.read()
    }
}
