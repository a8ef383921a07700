import NIOCore

/// How failures before the response head are retried: GET and HEAD only, on connect errors, connections
/// reset before the head, and 502/503/504. Once the head was delivered nothing is retried.
package struct OriginRetryPolicy: Sendable {
    /// Extra attempts after the first one.
    package var maxRetries: Int
    /// The delay before the first retry; doubled for each further one.
    package var baseDelay: TimeAmount
    /// The cap on one delay.
    package var maxDelay: TimeAmount

    /// Two extra attempts, 200 ms then 400 ms (each with jitter), at most 5 s.
    package init(maxRetries: Int = 2, baseDelay: TimeAmount = .milliseconds(200), maxDelay: TimeAmount = .seconds(5)) {
        self.maxRetries = max(0, maxRetries)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// The delay before retry number `retry` (1-based): exponential, capped, then a random 50–100 % of it
    /// so that many clients retrying a failed origin do not arrive in lockstep.
    package func delay(beforeRetry retry: Int) -> TimeAmount {
        let exponent = min(max(retry - 1, 0), 30)
        let (scaled, overflow) = baseDelay.nanoseconds.multipliedReportingOverflow(by: Int64(1) << exponent)
        let full = overflow ? maxDelay.nanoseconds : min(scaled, maxDelay.nanoseconds)
        guard full > 1 else { return .nanoseconds(max(full, 0)) }
        return .nanoseconds(Int64.random(in: (full / 2)...full))
    }
}
