#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's file-descriptor limit (`RLIMIT_NOFILE`, `ulimit -n`) and what it leaves for client connections.
///
/// Every client connection is a descriptor, and so is every cache file being read or written, every origin socket,
/// the SQLite files and the event loops' own. Out of descriptors, `accept(2)` fails with `EMFILE`; the server then
/// pauses accepting (``ProxyServer``), but it must never get there (libdispatch aborts the process when the table is
/// full; ``DescriptorHeadroom`` turns connections away as it nears full): `serve` raises the soft limit to the hard
/// one at start (as nginx's `worker_rlimit_nofile`), and holds `limits.maxConnections` below the limit minus
/// ``reserve(for:)``, so that a flood of idle connections is refused at accept while the server keeps descriptors
/// for its own work.
package struct DescriptorLimit: Sendable, Equatable {
    /// The soft limit now in force.
    package var soft: Int
    /// The hard limit (the most the soft one may be raised to without privilege).
    package var hard: Int
    /// The soft limit before ``raiseToHard()`` raised it; nil when it was not raised.
    package var raisedFrom: Int?

    package init(soft: Int, hard: Int, raisedFrom: Int? = nil) {
        self.soft = soft
        self.hard = hard
        self.raisedFrom = raisedFrom
    }

    /// The limit as it is, unchanged.
    package static func current() -> DescriptorLimit? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        return DescriptorLimit(soft: Self.count(limit.rlim_cur), hard: Self.count(limit.rlim_max))
    }

    /// Raises the soft limit to the hard one. An unlimited hard limit (root, some containers) is capped at the
    /// kernel's `fs.nr_open` (1,048,576 by default), above which `setrlimit` fails.
    package static func raiseToHard() -> DescriptorLimit? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let before = limit.rlim_cur
        var target = limit.rlim_max
        if target == rlim_t.max { target = rlim_t(nrOpen()) }
        guard target > before else { return DescriptorLimit(soft: count(before), hard: count(limit.rlim_max)) }
        var raised = limit
        raised.rlim_cur = target
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 else {
            return DescriptorLimit(soft: count(before), hard: count(limit.rlim_max))
        }
        return DescriptorLimit(soft: count(target), hard: count(limit.rlim_max), raisedFrom: count(before))
    }

    /// The lowest limit `serve` starts under. Below it the server's own descriptors (about 40: SQLite files, event
    /// loops, signals) and the headroom ``DescriptorHeadroom`` keeps free leave no room for a client, and parts that
    /// cannot fail politely run out first (NIO's event loops and libdispatch abort the process).
    package static let minimumToServe = 64

    /// Descriptors `serve` opens after it checked the room left (``tooLowToServe(soft:lowestFree:extra:)``): the
    /// listener, three signal descriptors, pipes and a timer of the thread pools, SQLite readers opened on demand
    /// (measured: 15 under `ulimit -n 64`).
    package static let openedAfterCheck = 16

    /// What `serve` says and does when the limit is below ``minimumToServe``, or leaves no room for connections once
    /// the server's own descriptors are open (`lowestFree`: the lowest free descriptor then; `extra`: descriptors the
    /// server still opens after it looked): nil when there is room, else the line to print before exiting.
    package static func tooLowToServe(soft: Int, lowestFree: Int?, extra: Int) -> String? {
        guard soft < Int(Int32.max) else { return nil }
        let headroom = DescriptorHeadroom.headroom(for: soft)
        if soft < minimumToServe {
            return
                "the file descriptor limit is \(soft) (ulimit -n): serve needs at least \(minimumToServe) (its own files, its event loops and a reserve kept free); raise it"
        }
        guard let lowestFree else { return nil }
        // One connection at least: the lowest free descriptor after `extra` more must stay below the headroom.
        let needed = lowestFree + extra + headroom + 1
        guard needed > soft else { return nil }
        return
            "the file descriptor limit is \(soft) (ulimit -n): the server holds \(lowestFree) descriptors before it listens and keeps \(headroom) free, which leaves no room for a connection; raise it to at least \(needed) (a few thousand is better)"
    }

    /// Descriptors kept back from client connections: a quarter of the limit, at least 128 (cache files, the origin
    /// pools of the proxy and of the downloads, SQLite, event loops), and at most half of it.
    package static func reserve(for limit: Int) -> Int {
        min(max(128, limit / 4), limit / 2)
    }

    /// The most client connections this limit leaves room for.
    package var connectionCap: Int {
        max(1, soft - Self.reserve(for: soft))
    }

    /// `configured`, or ``connectionCap`` when that is lower.
    package func maxConnections(configured: Int) -> Int {
        min(configured, connectionCap)
    }

    private static func count(_ value: rlim_t) -> Int {
        value == rlim_t.max || value > rlim_t(Int.max) ? Int.max : Int(value)
    }

    /// `/proc/sys/fs/nr_open`, or 1,048,576 (its default) when it cannot be read.
    private static func nrOpen() -> Int {
        let fallback = 1 << 20
        guard let file = fopen("/proc/sys/fs/nr_open", "r") else { return fallback }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 32)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return fallback }
        let digits = buffer.prefix { $0 >= 0x30 && $0 <= 0x39 }.map { Character(UnicodeScalar(UInt8($0))) }
        guard let value = Int(String(digits)), value > 0 else { return fallback }
        return value
    }
}
