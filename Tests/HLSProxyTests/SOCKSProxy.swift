import HLSTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A SOCKS5 proxy on 127.0.0.1 (RFC 1928, no authentication, `CONNECT` only) whose connections all lead to one
/// fixed target, whatever the address asked for: a name under `.test` resolves nowhere, so a response can only
/// have come through it. It logs the targets it was asked for (`host:port`). With `offering` set to another
/// method than "no authentication" (0), it refuses every client, as a proxy that wants a password does.
final class SOCKSProxy: Sendable {
    private let channel: any Channel
    private let log: NIOLockedValueBox<[String]>
    let port: Int

    /// The targets asked for so far, `host:port`, in order.
    var requests: [String] { log.withLockedValue { $0 } }

    private init(channel: any Channel, log: NIOLockedValueBox<[String]>) {
        self.channel = channel
        self.log = log
        port = channel.localAddress?.port ?? 0
    }

    static func start(forwardingTo targetPort: Int, requiringMethod method: UInt8 = 0) async throws -> SOCKSProxy {
        let log = NIOLockedValueBox<[String]>([])
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(SOCKSHandshake(targetPort: targetPort, method: method, log: log))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return SOCKSProxy(channel: channel, log: log)
    }

    func stop() async {
        try? await channel.close()
    }
}

/// The two exchanges of a SOCKS5 handshake (greeting, then request), then a relay to the target.
private final class SOCKSHandshake: ChannelInboundHandler, RemovableChannelHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let targetPort: Int
    private let method: UInt8
    private let log: NIOLockedValueBox<[String]>
    private var buffer = ByteBuffer()
    private var greeted = false

    init(targetPort: Int, method: UInt8, log: NIOLockedValueBox<[String]>) {
        self.targetPort = targetPort
        self.method = method
        self.log = log
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var incoming = unwrapInboundIn(data)
        buffer.writeBuffer(&incoming)
        if !greeted {
            // VER NMETHODS METHODS…
            guard let bytes = buffer.getBytes(at: buffer.readerIndex, length: min(buffer.readableBytes, 2)), bytes.count == 2,
                buffer.readableBytes >= 2 + Int(bytes[1])
            else { return }
            let methods = buffer.getBytes(at: buffer.readerIndex + 2, length: Int(bytes[1])) ?? []
            buffer.moveReaderIndex(forwardBy: 2 + Int(bytes[1]))
            guard bytes[0] == 5, methods.contains(method), method == 0 else {
                // "No acceptable methods" (or the method we want, which the client did not offer).
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [5, 0xFF])), promise: nil)
                context.close(promise: nil)
                return
            }
            greeted = true
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [5, 0])), promise: nil)
        }
        // VER CMD RSV ATYP DST.ADDR DST.PORT
        guard let head = buffer.getBytes(at: buffer.readerIndex, length: min(buffer.readableBytes, 5)), head.count == 5 else { return }
        let addressLength: Int
        switch head[3] {
        case 1: addressLength = 4
        case 4: addressLength = 16
        case 3: addressLength = 1 + Int(head[4])
        default:
            context.close(promise: nil)
            return
        }
        guard buffer.readableBytes >= 4 + addressLength + 2 else { return }
        buffer.moveReaderIndex(forwardBy: 4)
        let address = buffer.readBytes(length: addressLength) ?? []
        let port = Int(buffer.readInteger(as: UInt16.self) ?? 0)
        let host: String
        switch head[3] {
        case 3: host = String(decoding: address.dropFirst(), as: UTF8.self)
        case 1: host = address.map(String.init).joined(separator: ".")
        default: host = "[ipv6]"
        }
        log.withLockedValue { $0.append("\(host):\(port)") }
        connect(context: context)
    }

    private func connect(context: ChannelHandlerContext) {
        let client = context.channel
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        ClientBootstrap(group: context.eventLoop).connect(host: "127.0.0.1", port: targetPort).whenComplete { [self] result in
            let context = bound.value
            switch result {
            case .failure:
                // REP 5: connection refused.
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [5, 5, 0, 1, 0, 0, 0, 0, 0, 0])), promise: nil)
                context.close(promise: nil)
            case .success(let target):
                context.writeAndFlush(wrapOutboundOut(ByteBuffer(bytes: [5, 0, 0, 1, 127, 0, 0, 1, 0, 0])), promise: nil)
                let (ours, theirs) = GlueHandler.matchedPair()
                do {
                    try target.pipeline.syncOperations.addHandler(theirs)
                    try context.pipeline.syncOperations.addHandler(ours)
                    context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
                } catch {
                    client.close(promise: nil)
                    target.close(promise: nil)
                }
            }
        }
    }
}
