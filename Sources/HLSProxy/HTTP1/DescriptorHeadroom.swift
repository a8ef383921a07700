#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import NIOConcurrencyHelpers
import NIOCore

/// Keeps the descriptor table from filling up with client connections: a connection accepted while the lowest free
/// descriptor (the one the kernel hands out next) is at or above ``ceiling`` is closed at once.
///
/// The table must never fill. On Linux, Swift concurrency runs on libdispatch, whose thread-pool monitor opens
/// `/proc/TID/stat` once a second while work is queued and aborts the process when it cannot ("workq: registered
/// worker exited prematurely", SIGILL): under `ulimit -n 64` a flood of idle connections killed about one server in
/// four. ``DescriptorLimit`` holds `limits.maxConnections` below the limit minus a reserve, but cannot know how many
/// descriptors the server itself has open (about 40 for a debug build before it listens, more as SQLite opens
/// readers); this looks at the table itself, for two system calls per accepted connection (`fcntl(F_DUPFD)` and
/// `close` of what it returns). Descriptors fill from the lowest free one, so the lowest free one nearing the limit
/// means the table is nearly full.
package final class DescriptorHeadroom: Sendable {
    /// Descriptors kept free: an eighth of the limit, at least 16 (SQLite opens readers on demand, two descriptors
    /// each) and at most 256.
    package static func headroom(for limit: Int) -> Int {
        min(256, max(16, limit / 8))
    }

    /// The descriptor limit (`ulimit -n`) and how many of it are kept free.
    package let limit: Int
    package let headroom: Int
    /// The lowest free descriptor must be below this for a connection to be kept.
    package var ceiling: Int { limit - headroom }
    /// What `fcntl(F_DUPFD)` duplicates to find the lowest free descriptor (`/dev/null`).
    private let probe: CInt
    private let report = NIOLockedValueBox(LinePerMinute())

    /// For the process's descriptor limit now; nil when it is unlimited or cannot be read, or `/dev/null` cannot be
    /// opened.
    package convenience init?() {
        guard let limit = DescriptorLimit.current(), limit.soft < Int(Int32.max) else { return nil }
        self.init(limit: limit.soft, headroom: Self.headroom(for: limit.soft))
    }

    package init?(limit: Int, headroom: Int) {
        let probe = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard probe >= 0 else { return nil }
        self.probe = probe
        self.limit = limit
        self.headroom = headroom
    }

    deinit { close(probe) }

    /// The lowest free descriptor now (the next one the kernel hands out), or nil when it cannot be told.
    package static func lowestFree() -> Int? {
        let probe = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard probe >= 0 else { return nil }
        close(probe)
        // Opening takes the lowest free descriptor: that one was free.
        return Int(probe)
    }

    /// Whether a connection just accepted may stay: the lowest free descriptor is below ``ceiling``. None free
    /// (`EMFILE`) is no room.
    package func hasRoom() -> Bool {
        let lowest = fcntl(probe, F_DUPFD_CLOEXEC, 0)
        guard lowest >= 0 else { return false }
        close(lowest)
        return Int(lowest) < ceiling
    }

    /// Counts a refused connection; returns the line to log now, if any: the first refusal, then at most one line a
    /// minute with the number since the last one.
    package func refused(now: NIODeadline) -> String? {
        guard let (first, count) = report.withLockedValue({ $0.count(now: now) }) else { return nil }
        return first
            ? "file descriptors running low (at most \(headroom) of \(limit) free, ulimit -n): closing new connections at accept until more are free (raise ulimit -n)"
            : "file descriptors running low: \(count) connection(s) closed at accept since the last such line"
    }
}
