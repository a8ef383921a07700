import Logging
import NIOCore

/// Sees every answered request once: counts it in ``ProxyMetrics`` and writes the access-log line.
final class ExchangeObserver: Sendable {
    let metrics: ProxyMetrics
    /// The access log (label `hlscache.access`), or nil when it is off or its level is above `info`: then no
    /// line is ever built.
    private let accessLog: Logger?

    /// Whether an access-log line is written (and the time a request took is wanted).
    var logsAccess: Bool { accessLog != nil }

    init(metrics: ProxyMetrics, accessLog: Logger?) {
        self.metrics = metrics
        self.accessLog = accessLog.flatMap { $0.logLevel <= .info ? $0 : nil }
    }

    /// - Parameters:
    ///   - status: the status sent, or 499 when the client left before an answer started.
    ///   - bytes: body bytes handed to the connection.
    ///   - complete: false when the connection ended before the whole response was written.
    ///   - shard: the index of the event loop it was answered on (``ShardedCounts``).
    func exchangeCompleted(
        request: ProxyRequest, route: RequestRoute, status: Int, cache: CacheResult, bytes: Int64, startedAt: NIODeadline, complete: Bool,
        shard: Int = 0
    ) {
        metrics.record(route: route, status: status, cache: cache, bytes: bytes, shard: shard)
        guard let accessLog else { return }
        AccessLogLine(
            method: request.method.rawValue, target: request.head.uri, status: status, bytes: bytes, cache: cache,
            duration: NIODeadline.now() - startedAt, remote: request.remoteAddress?.ipAddress, complete: complete
        ).write(to: accessLog)
    }
}
