import Foundation

/// Who owns a download, robust against PID reuse: `boot-id:start-time` of a process, read from `/proc`.
///
/// A PID alone is not enough: PIDs are reused, and in a container `hlscache serve` is PID 1 on every start, so
/// an item left `downloading` by the previous container would look owned by the new one forever. The start time
/// (clock ticks since boot, `/proc/PID/stat` field 22) and the boot id together name one process run.
enum ProcessIdentity {
    /// This process's token; `nil` where `/proc` is not available (then owners are checked by PID only).
    static let current: String? = token(of: getpid())

    /// The token of the running process `pid`, or `nil` if there is none (or no `/proc`).
    static func token(of pid: Int32) -> String? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name (which may hold spaces and parentheses): state is field 3, start time 22.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19 else { return nil }
        return "\(bootID):\(fields[19])"
    }

    private static let bootID: String =
        (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        ?? "-"

    /// Whether the process that claimed an item with (`pid`, `token`) still runs.
    static func isAlive(_ pid: Int32, token: String?) -> Bool {
        if let token { return self.token(of: pid) == token }
        if pid == getpid() { return true }
        return kill(pid, 0) == 0 || errno == EPERM
    }
}
