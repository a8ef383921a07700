import HLSTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// An HTTP forward proxy on 127.0.0.1 that tunnels `CONNECT host:port` (as AsyncHTTPClient asks a proxy for every
/// request, plain HTTP included) to one fixed target, whatever the host: names under `.test` resolve nowhere, so a
/// response can only have come through the tunnel. It logs the `CONNECT` targets it was asked for, and can
/// require a `Proxy-Authorization` (a 407 otherwise, as squid answers).
final class ConnectProxy: Sendable {
    private let channel: any Channel
    private let log: NIOLockedValueBox<[(request: String, authorization: String?)]>
    let port: Int

    /// The requests asked of the proxy so far (`CONNECT host:port`), in order.
    var requests: [String] { log.withLockedValue { $0.map(\.request) } }
    /// The `Proxy-Authorization` of each request (nil: none sent), in order.
    var authorizations: [String?] { log.withLockedValue { $0.map(\.authorization) } }

    private init(channel: any Channel, log: NIOLockedValueBox<[(request: String, authorization: String?)]>) {
        self.channel = channel
        self.log = log
        port = channel.localAddress?.port ?? 0
    }

    /// Starts a proxy whose tunnels all lead to 127.0.0.1:`targetPort`; with `requiredAuthorization` (a
    /// `Proxy-Authorization` value, e.g. `Basic dTpw`) any other request is answered 407.
    static func start(forwardingTo targetPort: Int, requiredAuthorization: String? = nil) async throws -> ConnectProxy {
        let log = NIOLockedValueBox<[(request: String, authorization: String?)]>([])
        let group = MultiThreadedEventLoopGroup.singleton
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let decoder = ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .forwardBytes))
                    let encoder = HTTPResponseEncoder()
                    try channel.pipeline.syncOperations.addHandler(decoder)
                    try channel.pipeline.syncOperations.addHandler(encoder)
                    try channel.pipeline.syncOperations.addHandler(
                        ConnectHandler(
                            targetPort: targetPort, requiredAuthorization: requiredAuthorization, decoder: decoder, encoder: encoder,
                            log: log))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return ConnectProxy(channel: channel, log: log)
    }

    func stop() async {
        try? await channel.close()
    }
}

/// Answers one `CONNECT` with 200, then relays bytes both ways between the client and a new connection to the target.
private final class ConnectHandler: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let targetPort: Int
    private let requiredAuthorization: String?
    private let decoder: ByteToMessageHandler<HTTPRequestDecoder>
    private let encoder: HTTPResponseEncoder
    private let log: NIOLockedValueBox<[(request: String, authorization: String?)]>
    private var head: HTTPRequestHead?

    init(
        targetPort: Int, requiredAuthorization: String?, decoder: ByteToMessageHandler<HTTPRequestDecoder>, encoder: HTTPResponseEncoder,
        log: NIOLockedValueBox<[(request: String, authorization: String?)]>
    ) {
        self.targetPort = targetPort
        self.requiredAuthorization = requiredAuthorization
        self.decoder = decoder
        self.encoder = encoder
        self.log = log
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            let authorization = head.headers.first(name: "Proxy-Authorization")
            log.withLockedValue { $0.append(("\(head.method.rawValue) \(head.uri)", authorization)) }
            guard head.method == .CONNECT else { return refuse(context: context, .methodNotAllowed) }
            if let requiredAuthorization, authorization != requiredAuthorization {
                return refuse(context: context, .proxyAuthenticationRequired, ("Proxy-Authenticate", "Basic realm=\"test\""))
            }
            tunnel(context: context)
        }
    }

    private func refuse(context: ChannelHandlerContext, _ status: HTTPResponseStatus, _ header: (String, String)? = nil) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Length", value: "0")
        if let header { headers.add(name: header.0, value: header.1) }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    private func tunnel(context: ChannelHandlerContext) {
        let client = context.channel
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop)
            .connect(host: "127.0.0.1", port: targetPort)
            .whenComplete { [self] result in
                let context = bound.value
                switch result {
                case .failure:
                    context.close(promise: nil)
                case .success(let target):
                    context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok))), promise: nil)
                    context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                    let (ours, theirs) = GlueHandler.matchedPair()
                    do {
                        context.pipeline.syncOperations.removeHandler(encoder, promise: nil)
                        try target.pipeline.syncOperations.addHandler(theirs)
                        try context.pipeline.syncOperations.addHandler(ours)
                        // Last: the decoder hands on what it buffered after the CONNECT head, as bytes.
                        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
                        context.pipeline.syncOperations.removeHandler(decoder, promise: nil)
                    } catch {
                        client.close(promise: nil)
                        target.close(promise: nil)
                    }
                }
            }
    }
}

/// Relays bytes between two channels (the shape of SwiftNIO's connect-proxy example).
final class GlueHandler: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = NIOAny
    typealias OutboundIn = NIOAny
    typealias OutboundOut = NIOAny

    private var partner: GlueHandler?
    private var context: ChannelHandlerContext?
    private var pendingRead = false

    static func matchedPair() -> (GlueHandler, GlueHandler) {
        let first = GlueHandler()
        let second = GlueHandler()
        first.partner = second
        second.partner = first
        return (first, second)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    private func partnerWrite(_ data: NIOAny) { context?.write(data, promise: nil) }
    private func partnerFlush() { context?.flush() }
    private func partnerCloseFull() { context?.close(promise: nil) }
    private var partnerWritable: Bool { context?.channel.isWritable ?? false }

    private func partnerBecameWritable() {
        if pendingRead {
            pendingRead = false
            context?.read()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) { partner?.partnerWrite(data) }
    func channelReadComplete(context: ChannelHandlerContext) { partner?.partnerFlush() }
    func channelInactive(context: ChannelHandlerContext) { partner?.partnerCloseFull() }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { partner?.partnerBecameWritable() }
    }

    func read(context: ChannelHandlerContext) {
        if let partner, partner.partnerWritable {
            context.read()
        } else {
            pendingRead = true
        }
    }
}
