/// How a large body whose copy in the memory tier is *cold* is sent (`cache.memoryColdSends`) — a copy not sent
/// lately on an event loop other connections share, or any copy while ``MemoryTier/maxLargeSends`` other connections
/// hold a large body — where every connection on its loop holds a large body (elsewhere a cold copy takes its file:
/// ``MemoryTier/bodyToSend(of:on:alone:headOnly:counted:)``).
///
/// `auto` goes by the load. A copy from memory costs the sender a copy that `sendfile` does not, but a loopback
/// receiver (the players of a local proxy) then reads bytes that copy just put in the CPU's caches, where after
/// `sendfile` it reads the page cache from RAM: machine-wide a cold 2 MiB body cost ~830–1,270 µs of CPU from memory
/// against ~1,450–1,530 with `sendfile` (`Benchmarks/send-ways.sh`). With many large bodies in flight the copies are
/// pushed out of the caches before they are read, and the sender's copy is a cost without a saving. Measured on the
/// viewing benchmarks, in both roles: at 8 connections walking a library, copies served 10–18 % more hits than
/// `sendfile`; at 64, `sendfile` was level or 10 % ahead (docs/benchmarks.md, issue 39). On a machine where copies
/// cost more than `sendfile` machine-wide, the two were level at 8 connections (within ±6 %). The server's own CPU
/// per send, timed per way, did not tell these apart — it cannot see the receiver's share, and moved between runs.
package enum ColdSendMode: String, Sendable, CaseIterable {
    /// From memory while fewer than `cache.memoryLargeSends` other connections hold a large body (the copy is cold
    /// for not having been sent lately), from its file past that.
    case auto
    /// Always from memory.
    case memory
    /// Always from the file, with `sendfile`.
    case file

    /// Whether a cold copy goes from memory; `crowded`: ``MemoryTier/maxLargeSends`` or more other connections hold a
    /// large body.
    package func fromMemory(crowded: Bool) -> Bool {
        switch self {
        case .auto: !crowded
        case .memory: true
        case .file: false
        }
    }
}
