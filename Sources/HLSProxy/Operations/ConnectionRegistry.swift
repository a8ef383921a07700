import NIOConcurrencyHelpers
import NIOCore

/// Tells a connection's handler that the server is shutting down: close when idle, and say
/// `Connection: close` on the response in progress.
struct ServerDrainEvent: Sendable {}

/// The open client connections, so that a shutdown can ask each to finish and close the stragglers.
final class ConnectionRegistry: Sendable {
    private let channels = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
    private let draining = NIOLockedValueBox(false)

    /// Records a new connection. Returns false when the server is already draining (close it).
    func add(_ channel: any Channel) -> Bool {
        let id = ObjectIdentifier(channel)
        channels.withLockedValue { $0[id] = channel }
        channel.closeFuture.whenComplete { _ in _ = self.channels.withLockedValue { $0.removeValue(forKey: id) } }
        return !isDraining
    }

    var count: Int { channels.withLockedValue { $0.count } }
    /// The open connections, now.
    var open: [any Channel] { channels.withLockedValue { Array($0.values) } }
    var isDraining: Bool { draining.withLockedValue { $0 } }

    /// Marks the server as draining and tells every open connection.
    func drain() {
        draining.withLockedValue { $0 = true }
        for channel in channels.withLockedValue({ Array($0.values) }) {
            channel.pipeline.fireUserInboundEventTriggered(ServerDrainEvent())
        }
    }

    /// Closes every connection still open.
    func closeAll() {
        for channel in channels.withLockedValue({ Array($0.values) }) {
            channel.close(promise: nil)
        }
    }
}
