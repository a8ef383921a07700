import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP relay on 127.0.0.1 standing in for a fleet's balancer in front of one node: each connection it accepts is
/// relayed, bytes both ways, to a new connection to 127.0.0.1:``target`` — set once the node is listening (the node's
/// configuration names the relay first).
final class TCPForwarder: Sendable {
    private let channel: any Channel
    private let targetPort: NIOLockedValueBox<Int>
    let port: Int

    /// Where accepted connections go (0 until set: they are closed).
    var target: Int {
        get { targetPort.withLockedValue { $0 } }
        set { targetPort.withLockedValue { $0 = newValue } }
    }

    private init(channel: any Channel, targetPort: NIOLockedValueBox<Int>) {
        self.channel = channel
        self.targetPort = targetPort
        port = channel.localAddress?.port ?? 0
    }

    static func start() async throws -> TCPForwarder {
        let targetPort = NIOLockedValueBox(0)
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            // A client is read from only once its initializer is done: the other end connected and glued in.
            .childChannelInitializer { client in
                let port = targetPort.withLockedValue { $0 }
                guard port > 0 else { return client.close() }
                return ClientBootstrap(group: client.eventLoop).connect(host: "127.0.0.1", port: port).flatMap { target in
                    let (ours, theirs) = GlueHandler.matchedPair()
                    return client.eventLoop.makeCompletedFuture {
                        try client.pipeline.syncOperations.addHandler(ours)
                        try target.pipeline.syncOperations.addHandler(theirs)
                    }
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return TCPForwarder(channel: channel, targetPort: targetPort)
    }

    func stop() async {
        try? await channel.close()
    }
}
