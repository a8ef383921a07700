import NIOCore
import NIOHTTP1

/// Answers `/metrics` (Prometheus text format) and `/readyz` (ready to serve: 200, or 503 with a JSON reason).
/// `/healthz` (liveness) stays in the router: it never touches the disk.
final class OperationsEndpoint: Sendable {
    private let services: ProxyServices

    init(services: ProxyServices) {
        self.services = services
    }

    /// `GET /metrics`. Gauges (cache size, connections, downloads by state) are computed now, off the event loop.
    func metrics(_ responder: Responder) {
        guard services.configuration.metricsEnabled else {
            responder.send(error: ProxyError.notFound("metrics are disabled (metrics.enabled: false)"))
            return
        }
        let services = self.services
        services.runBlocking(on: responder.eventLoop) { () -> [UInt8] in
            let usage = try? services.store.usage()
            let states = try? services.adjustable.withLockedValue { $0.downloadStates }?()
            services.metrics.update(
                ProxyMetrics.Snapshot(
                    activeConnections: services.connections.count, originFetchesInFlight: services.fetches.count,
                    inFlightBytes: services.inFlight.used,
                    cacheBytes: usage?.bytes,
                    cacheObjects: usage?.count, cacheCapacity: services.store.maxBytes,
                    memoryTier: {
                        let held = services.memory.usage
                        return (
                            held.bytes, held.count, services.memory.largeSendsInFlight, services.memory.maxBytes, services.memory.reads
                        )
                    }(),
                    coldSends: services.memory.coldSendCounts,
                    diskFree: services.store.freeDiskBytes(),
                    keys: services.keys.statistics,
                    downloadStates: states,
                    originConnectionWaits: {
                        let waits = services.origin.connectionWaits; return (waits.waits, waits.waiting)
                    }()))
            return services.metrics.emit()
        }.whenComplete { result in
            switch result {
            case .success(let bytes):
                var headers = HTTPHeaders()
                headers.add(name: "Content-Type", value: "text/plain; version=0.0.4; charset=utf-8")
                headers.add(name: "Content-Length", value: String(bytes.count))
                headers.add(name: "Cache-Control", value: "no-store")
                responder.send(status: .ok, headers: headers, body: .bytes(ByteBuffer(bytes: bytes)))
            case .failure(let error):
                responder.send(error: ProxyError.unavailable("metrics could not be collected: \(error)"))
            }
        }
    }

    /// `GET /readyz`: the index answers, the cache directory takes writes (a full file system: 200 "degraded"), and
    /// the server is not shutting down.
    func ready(_ responder: Responder) {
        let services = self.services
        if services.isDraining {
            Self.send(problem: "the server is shutting down", to: responder)
            return
        }
        services.runBlocking(on: responder.eventLoop) { services.store.readiness() }.whenComplete { result in
            switch result {
            case .success(.ready):
                Self.send(.ok, "{\"status\":\"ready\"}\n", to: responder)
            case .success(.degraded(let reason)):
                // Still worth traffic: hits are served and misses relayed.
                Self.send(.ok, "{\"status\":\"degraded\",\"reason\":\(ErrorBody.quote(reason))}\n", to: responder)
            case .success(.unavailable(let problem)):
                Self.send(problem: problem, to: responder)
            case .failure(let error):
                Self.send(problem: "the readiness check could not run: \(error)", to: responder)
            }
        }
    }

    private static func send(problem: String, to responder: Responder) {
        send(.serviceUnavailable, "{\"status\":\"unavailable\",\"reason\":\(ErrorBody.quote(problem))}\n", to: responder)
    }

    private static func send(_ status: HTTPResponseStatus, _ body: String, to responder: Responder) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(body.utf8.count))
        headers.add(name: "Cache-Control", value: "no-store")
        responder.send(status: status, headers: headers, body: .bytes(ByteBuffer(string: body)))
    }
}
