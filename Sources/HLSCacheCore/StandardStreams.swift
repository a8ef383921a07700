import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Whole writes to standard output and standard error, for the command line's output (`ConsoleOutput`) and the JSON
/// log (`JSONLogHandler`) alike: one `write(2)` loop per text under one lock, so that texts written by many threads
/// never interleave, and the order of the two streams is the order of the calls.
///
/// A descriptor whose reader went away (`EPIPE`, or any error other than an interruption) is dropped for good: later
/// texts to it are discarded, and the caller carries on.
package enum StandardStreams {
    /// Descriptors written to, and whether each was dropped, under the lock that keeps writes whole.
    private static let dropped = Mutex<Set<Int32>>([])

    /// Writes all of `text` to `descriptor` (1: standard output, 2: standard error) unless it was dropped.
    package static func write(_ text: String, to descriptor: Int32) {
        dropped.withLock { dropped in
            guard !dropped.contains(descriptor) else { return }
            var text = text
            text.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = systemWrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if written >= 0 {
                        offset += written
                    } else if errno != EINTR && errno != EAGAIN {
                        dropped.insert(descriptor)
                        return
                    }
                }
            }
        }
    }

    /// Whether writes to `descriptor` failed for good (tests).
    package static func isDropped(_ descriptor: Int32) -> Bool { dropped.withLock { $0.contains(descriptor) } }

    private static func systemWrite(_ descriptor: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
        #if canImport(Darwin)
            Darwin.write(descriptor, buffer, count)
        #elseif canImport(Musl)
            Musl.write(descriptor, buffer, count)
        #else
            Glibc.write(descriptor, buffer, count)
        #endif
    }
}
