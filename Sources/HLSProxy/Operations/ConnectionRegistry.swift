import NIOConcurrencyHelpers
import NIOCore

/// Tells a connection's handler that the server is shutting down: close when idle, and say
/// `Connection: close` on the response in progress.
struct ServerDrainEvent: Sendable {}

/// The open client connections, so that a shutdown can ask each to finish and close the stragglers.
final class ConnectionRegistry: Sendable {
    private struct State {
        var channels: [ObjectIdentifier: any Channel] = [:]
        var draining = false
    }

    private let state = NIOLockedValueBox(State())

    /// Records a new connection. Returns false when the server is already draining (close it).
    func add(_ channel: any Channel) -> Bool {
        let id = ObjectIdentifier(channel)
        let draining = state.withLockedValue { state in
            state.channels[id] = channel
            return state.draining
        }
        channel.closeFuture.whenComplete { _ in _ = self.state.withLockedValue { $0.channels.removeValue(forKey: id) } }
        return !draining
    }

    var count: Int { state.withLockedValue { $0.channels.count } }
    /// The open connections, now.
    var open: [any Channel] { state.withLockedValue { Array($0.channels.values) } }
    var isDraining: Bool { state.withLockedValue { $0.draining } }

    /// Marks the server as draining and tells every open connection.
    func drain() {
        let open = state.withLockedValue { state in
            state.draining = true
            return Array(state.channels.values)
        }
        for channel in open {
            channel.pipeline.fireUserInboundEventTriggered(ServerDrainEvent())
        }
    }

    /// Closes every connection still open.
    func closeAll() {
        for channel in open {
            channel.close(promise: nil)
        }
    }
}
