import NIOCore

extension ProxyServer {
    /// Stops accepting (the listening socket closes, so new connections are refused), closes idle keep-alive
    /// connections, and lets the responses in flight finish with `Connection: close`.
    package func beginShutdown() {
        services.connections.drain()
        closingListener()?.close(promise: nil)
    }

    /// ``beginShutdown()``, then waits until every connection has closed or `gracePeriod` has passed, and
    /// closes the ones still open (a response that did not finish in time is cut off).
    /// - Returns: the number of connections closed at the deadline.
    @discardableResult
    package func shutdown(gracePeriod: Duration) async -> Int {
        beginShutdown()
        let deadline = ContinuousClock.now + gracePeriod
        while services.connections.count > 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        let remaining = services.connections.count
        if remaining > 0 {
            services.logger.warning("shutdown: closing \(remaining) connection(s) still busy after \(gracePeriod)")
            services.connections.closeAll()
            let closeDeadline = ContinuousClock.now + .seconds(2)
            while services.connections.count > 0 && ContinuousClock.now < closeDeadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        stopDates()
        return remaining
    }

    /// The server's metrics (also on `/metrics`).
    package var metrics: ProxyMetrics { services.metrics }

    /// Gives `/metrics` the number of prewarm items in each state (`hlscache_downloads{state}`); called at
    /// scrape time, off the event loops.
    package func setDownloadStateProvider(_ provider: @escaping @Sendable () throws -> [String: Int]) {
        services.adjustable.withLockedValue { $0.downloadStates = provider }
    }
}
