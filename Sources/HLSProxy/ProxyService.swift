import Logging
import NIOCore
import ServiceLifecycle

/// Runs a ``ProxyServer`` inside a swift-service-lifecycle `ServiceGroup`: on SIGTERM/SIGINT it stops
/// accepting, lets responses in flight finish for up to `gracePeriod`, then returns.
public struct ProxyService: Service {
    let server: ProxyServer
    let gracePeriod: Duration

    public init(server: ProxyServer, gracePeriod: Duration = .seconds(10)) {
        self.server = server
        self.gracePeriod = gracePeriod
    }

    public func run() async throws {
        if server.localAddress == nil { try await server.start() }
        try await withGracefulShutdownHandler {
            try await server.waitUntilClosed()
        } onGracefulShutdown: {
            Task { try? await server.stop() }
        }
        // The listener is closed; give open exchanges time to complete.
        let deadline = ContinuousClock.now + gracePeriod
        while server.openConnections > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}
