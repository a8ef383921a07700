/// The moving average of a transfer's speed: bytes over the last ``window`` (docs/api.md, `bytesPerSecond`).
///
/// Fed with the running total of bytes and when it was reached; keeps at most one sample per ``spacing`` for the
/// window (so its memory is bounded whatever the transfer's length), plus the newest sample older than the window as the
/// baseline. The speed is the bytes since the baseline over the time since it, so the speed of a transfer that stops
/// falls (``DownloadItem/speed(at:)`` shows 0 once nothing was stored for a window); unknown (`nil`) until a second of
/// transfer has been seen.
package struct TransferRate: Sendable {
    /// The span the average covers.
    package static let window: Duration = .seconds(10)
    /// The least time between two kept samples.
    static let spacing: Duration = .milliseconds(250)
    /// The shortest span an average is given for.
    static let minimumSpan: Duration = .seconds(1)

    private var samples: [(at: ContinuousClock.Instant, bytes: Int64)] = []

    package init() {}

    /// The running total is `bytes` at `now`.
    package mutating func add(total bytes: Int64, at now: ContinuousClock.Instant) {
        if let last = samples.last, bytes < last.bytes {
            samples.removeAll()  // a new count (the transfer started over): the old samples say nothing about it
        }
        if samples.count >= 2, let last = samples.last, now - samples[samples.count - 2].at < Self.spacing {
            samples[samples.count - 1] = (max(last.at, now), bytes)
        } else {
            samples.append((now, bytes))
        }
        // Keep the newest sample older than the window as the baseline; drop the ones before it.
        let start = now - Self.window
        if let firstInside = samples.firstIndex(where: { $0.at >= start }), firstInside > 1 {
            samples.removeFirst(firstInside - 1)
        }
    }

    /// Bytes per second over the window ending at `now`, or `nil` when less than a second has been seen.
    package func perSecond(at now: ContinuousClock.Instant) -> Double? {
        guard let base = samples.first, let last = samples.last else { return nil }
        let span = now - base.at
        guard span >= Self.minimumSpan else { return nil }
        let (seconds, attoseconds) = span.components
        return Double(last.bytes - base.bytes) / (Double(seconds) + Double(attoseconds) / 1e18)
    }
}
