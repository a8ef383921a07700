import Foundation
import HLSTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A webhook receiver on 127.0.0.1 (OS-chosen port): keeps every POST (headers and body) and answers 500 to the
/// first `failures` of them, 204 to the rest.
final class WebhookReceiver: Sendable {
    struct Received: Sendable {
        var headers: HTTPHeaders
        var body: String
        var status: Int
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]) ?? [:] }
    }

    private let received = NIOLockedValueBox<[Received]>([])
    private let failuresLeft: NIOLockedValueBox<Int>
    private let channel = NIOLockedValueBox<(any Channel)?>(nil)

    init(failures: Int) {
        failuresLeft = NIOLockedValueBox(failures)
    }

    var requests: [Received] { received.withLockedValue { $0 } }

    var url: String { "http://127.0.0.1:\(port)/hook" }

    /// The port it listens on (0 before ``start(port:)``).
    var port: Int { channel.withLockedValue { $0?.localAddress?.port } ?? 0 }

    /// Listens on `port` (0: one the OS chooses; a port it had before: the receiver back up at the same URL).
    func start(port: Int = 0) async throws {
        let receiver = self
        let bound = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap {
                    channel.pipeline.addHandler(Handler(receiver: receiver))
                }
            }
            .bind(host: "127.0.0.1", port: port).get()
        channel.withLockedValue { $0 = bound }
    }

    /// Starts on a free port below the ephemeral range (32768 and up on Linux), for a receiver that is stopped and
    /// started again on the same port: a port of that range can be taken meanwhile by any outgoing connection of the
    /// tests running beside this one.
    func startBelowTheEphemeralRange() async throws {
        try await HLSTestSupport.startBelowTheEphemeralRange { try await start(port: $0) }
    }

    func stop() async {
        try? await channel.withLockedValue { $0 }?.close()
    }

    fileprivate func answer(_ head: HTTPRequestHead, body: String) -> Int {
        let status = failuresLeft.withLockedValue { left -> Int in
            guard left > 0 else { return 204 }
            left -= 1
            return 500
        }
        received.withLockedValue { $0.append(Received(headers: head.headers, body: body, status: status)) }
        return status
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let receiver: WebhookReceiver
        var head: HTTPRequestHead?
        var body = ByteBuffer()

        init(receiver: WebhookReceiver) { self.receiver = receiver }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body.clear()
            case .body(var chunk):
                body.writeBuffer(&chunk)
            case .end:
                guard let head else { return }
                let status = receiver.answer(head, body: String(buffer: body))
                var headers = HTTPHeaders()
                headers.add(name: "Content-Length", value: "0")
                context.write(
                    wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .init(statusCode: status), headers: headers))),
                    promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
