import Foundation
import HLSCacheCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The one way the commands write to standard output and standard error.
///
/// A reader that goes away (`hlscache fetch URL | head -1`, `… | :`) closes the pipe: a write then fails with
/// `EPIPE`. `FileHandle.write(_:)` traps on that (`try!` inside Foundation), which killed `fetch` mid-download
/// and left its item `queued` or `downloading`. Here a stream whose reader is gone is simply dropped: later
/// output to it is discarded and the command carries on (a foreground download finishes, or is interrupted,
/// as if nobody had been reading), and its exit status says how the work went, not whether anyone listened.
/// `SIGPIPE` is ignored so that the failed write is reported as `EPIPE` instead of killing the process.
enum ConsoleOutput {
    /// Writes `text` to standard output as it is (no newline added).
    static func write(_ text: String) {
        _ = ignoreBrokenPipe
        StandardStreams.write(text, to: STDOUT_FILENO)
    }

    /// Writes `text` and a newline to standard output.
    static func line(_ text: String) {
        write(text + "\n")
    }

    /// Writes `text` and a newline to standard error.
    static func error(_ text: String) {
        _ = ignoreBrokenPipe
        StandardStreams.write(text + "\n", to: STDERR_FILENO)
    }

    /// Ignores `SIGPIPE` for the process, once, before the first write.
    private static let ignoreBrokenPipe: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()
}
