import Logging
import NIOCore
import ServiceLifecycle

/// Runs a ``ProxyServer`` inside a swift-service-lifecycle `ServiceGroup`: on SIGTERM/SIGINT it stops
/// accepting, closes idle keep-alive connections, lets responses in flight finish for up to `gracePeriod`,
/// closes what is left, then returns.
package struct ProxyService: Service {
    let server: ProxyServer
    let gracePeriod: Duration

    package init(server: ProxyServer, gracePeriod: Duration = .seconds(10)) {
        self.server = server
        self.gracePeriod = gracePeriod
    }

    package func run() async throws {
        // Started once: a listener that has closed since (its address then reads nil) is not bound again here.
        if server.listener == nil { try await server.start() }
        do {
            try await withGracefulShutdownHandler {
                try await server.waitUntilClosed()
            } onGracefulShutdown: {
                server.beginShutdown()
            }
        } catch {
            // The listener died (ProxyServer.ListenerClosed): what is in flight still finishes, then the error ends
            // the service group, and `serve` exits with it instead of running on without accepting.
            server.services.logger.critical("\(error)")
            await server.shutdown(gracePeriod: gracePeriod)
            throw error
        }
        await server.shutdown(gracePeriod: gracePeriod)
    }
}
