#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import NIOCore

/// Says when accepting connections fails without filling the log: the first failure is a line, then at most one
/// line a minute with the number of failures since the last one (the listener retries every
/// ``ProxyServer/acceptPause``, so a lasting shortage of descriptors fails five times a second).
struct AcceptFailureReport {
    static let interval = TimeAmount.seconds(60)
    private var lastLine: NIODeadline?
    private var unreported = 0

    /// Counts a failure; returns the line to log now, if any.
    mutating func failed(_ error: IOError, now: NIODeadline) -> String? {
        unreported += 1
        if let lastLine, now - lastLine < Self.interval { return nil }
        let what = error.errnoCode == EMFILE || error.errnoCode == ENFILE ? "out of file descriptors" : "\(error)"
        let line: String
        if lastLine == nil {
            line = "cannot accept connections: \(what); pausing accepts (raise ulimit -n, or lower limits.maxConnections)"
        } else {
            line = "cannot accept connections: \(what); \(unreported) failed accept(s) since the last such line"
        }
        lastLine = now
        unreported = 0
        return line
    }
}
