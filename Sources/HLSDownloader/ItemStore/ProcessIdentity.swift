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
    ///
    /// A process that has exited but not been reaped by its parent (state `Z`, zombie; `X`, dead) is not running:
    /// its `/proc` entry and start time stay until the parent waits for it — forever when the parent never does (a
    /// shell script that backgrounds `fetch` and `exec`s something else) — while it downloads nothing.
    static func token(of pid: Int32) -> String? {
        guard let fields = statFields(of: pid), fields.count > 19, !isExited(fields[0]) else { return nil }
        return "\(bootID):\(fields[19])"
    }

    /// The fields of `/proc/PID/stat` after the command name (which may hold spaces and parentheses): the state
    /// (field 3) first, the start time (field 22) at index 19.
    private static func statFields(of pid: Int32) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }

    /// Whether a `/proc/PID/stat` state is that of a process that has exited: `Z` (zombie), `X` (dead).
    private static func isExited(_ state: Substring) -> Bool {
        state == "Z" || state == "X" || state == "x"
    }

    private static let bootID: String =
        (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        ?? "-"

    /// Whether the process that claimed an item with (`pid`, `token`) still runs.
    static func isAlive(_ pid: Int32, token: String?) -> Bool {
        if let token { return self.token(of: pid) == token }
        if pid == getpid() { return true }
        // Without a token (an item written where `/proc` was missing) the PID decides, but a zombie is still dead.
        if let state = statFields(of: pid)?.first, isExited(state) { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }
}
