#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import NIOCore

/// A line for the first of a run of events, then at most one a minute with how many happened since the last line
/// (``AcceptFailureReport``, ``DescriptorHeadroom``).
struct LinePerMinute {
    static let interval = TimeAmount.seconds(60)
    private var lastLine: NIODeadline?
    private var unreported = 0

    /// Counts an event. nil: no line now; else whether it is the first line, and the events since the last one.
    mutating func count(now: NIODeadline) -> (first: Bool, events: Int)? {
        unreported += 1
        if let lastLine, now - lastLine < Self.interval { return nil }
        defer {
            lastLine = now
            unreported = 0
        }
        return (lastLine == nil, unreported)
    }
}

/// Says when accepting connections fails without filling the log: the first failure is a line, then at most one
/// line a minute with the number of failures since the last one (the listener retries every
/// ``ProxyServer/acceptPause``, so a lasting shortage of descriptors fails five times a second).
struct AcceptFailureReport {
    private var lines = LinePerMinute()

    /// Counts a failure; returns the line to log now, if any.
    mutating func failed(_ error: IOError, now: NIODeadline) -> String? {
        guard let (first, count) = lines.count(now: now) else { return nil }
        let what = error.errnoCode == EMFILE || error.errnoCode == ENFILE ? "out of file descriptors" : "\(error)"
        return first
            ? "cannot accept connections: \(what); pausing accepts (raise ulimit -n, or lower limits.maxConnections)"
            : "cannot accept connections: \(what); \(count) failed accept(s) since the last such line"
    }
}
