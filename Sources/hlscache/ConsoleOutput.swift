import Foundation
import NIOConcurrencyHelpers

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
    /// Standard output and standard error, each with a flag set once its reader is gone.
    private static let standardOutput = Stream(descriptor: STDOUT_FILENO)
    private static let standardError = Stream(descriptor: STDERR_FILENO)

    /// Writes `text` to standard output as it is (no newline added).
    static func write(_ text: String) {
        standardOutput.write(text)
    }

    /// Writes `text` and a newline to standard output.
    static func line(_ text: String) {
        standardOutput.write(text + "\n")
    }

    /// Writes `text` and a newline to standard error.
    static func error(_ text: String) {
        standardError.write(text + "\n")
    }

    /// One file descriptor, written unbuffered (every call reaches the pipe before it returns, so the order of
    /// standard output and standard error is the order of the calls), with the writes of concurrent tasks kept
    /// whole.
    private final class Stream: Sendable {
        private let descriptor: Int32
        /// `true` once a write failed for good (`EPIPE`, or any error other than an interruption).
        private let closed = NIOLockedValueBox(false)

        init(descriptor: Int32) {
            self.descriptor = descriptor
        }

        func write(_ text: String) {
            _ = ConsoleOutput.ignoreBrokenPipe
            closed.withLockedValue { closed in
                guard !closed else { return }
                var bytes = Array(text.utf8)[...]
                while !bytes.isEmpty {
                    let written = bytes.withUnsafeBytes { ConsoleOutput.systemWrite(descriptor, $0.baseAddress, $0.count) }
                    if written >= 0 {
                        bytes = bytes.dropFirst(written)
                    } else if errno != EINTR && errno != EAGAIN {
                        closed = true
                        return
                    }
                }
            }
        }
    }

    /// `write(2)`, named apart from ``Stream/write(_:)``.
    private static func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
        #if canImport(Glibc)
            Glibc.write(descriptor, buffer, count)
        #else
            Darwin.write(descriptor, buffer, count)
        #endif
    }

    /// Ignores `SIGPIPE` for the process, once, before the first write.
    private static let ignoreBrokenPipe: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()
}
