import Foundation

/// The memory tier's size when `cache.memorySize` is `auto` (the default): a 64th of the memory this process may
/// use — the machine's, or its control group's limit when lower (a container's `--memory`) — within 64 MiB and
/// 1 GiB, and never more than an eighth of that memory. 384 MiB on a 24 GiB machine, 64 MiB on a 2 GiB one,
/// 32 MiB in a 256 MiB container. Pure but for ``machineDefault``, which reads the machine.
package enum MemoryTierSizing {
    package static let minimumBytes = 64 << 20
    package static let maximumBytes = 1 << 30
    /// The share of the usable memory taken.
    package static let share = 64

    /// The size for a process that may use `physicalMemory` bytes, or `limit` when set and lower.
    package static func defaultBytes(physicalMemory: Int, limit: Int?) -> Int {
        let usable = max(0, min(physicalMemory, limit ?? .max))
        return min(max(usable / share, minimumBytes), maximumBytes, usable / 8)
    }

    /// ``defaultBytes(physicalMemory:limit:)`` for this machine and this process's control group.
    package static var machineDefault: Int {
        defaultBytes(physicalMemory: Int(clamping: ProcessInfo.processInfo.physicalMemory), limit: controlGroupLimit())
    }

    /// The memory limit of this process's control group, if it has one (cgroup v2 `memory.max`, else v1
    /// `memory.limit_in_bytes`; "max" and v1's near-2^63 "unlimited" count as none).
    package static func controlGroupLimit(root: String = "/sys/fs/cgroup") -> Int? {
        for file in [root + "/memory.max", root + "/memory/memory.limit_in_bytes"] {
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { continue }
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            guard let bytes = Int(value), bytes > 0, bytes < 1 << 60 else { return nil }
            return bytes
        }
        return nil
    }
}
