import Foundation

/// `serve.pid` in the cache directory: the process id of the newest `serve` of that cache, so `hlscache reload`
/// (and a new `serve --take-over`) find it. Written once the server listens; removed at exit by the process it names.
enum ServePIDFile {
    static func path(cacheDirectory: String) -> String { cacheDirectory + "/serve.pid" }

    /// Writes this process's id (replacing an older server's: the newest one is the one to signal).
    static func write(cacheDirectory: String) {
        let path = path(cacheDirectory: cacheDirectory)
        let temporary = path + ".\(getpid()).tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: Data("\(getpid())\n".utf8)) else { return }
        if rename(temporary, path) != 0 { unlink(temporary) }
    }

    /// Removes the file if it still names this process.
    static func remove(cacheDirectory: String) {
        let path = path(cacheDirectory: cacheDirectory)
        if read(cacheDirectory: cacheDirectory) == getpid() { unlink(path) }
    }

    /// The process id in the file, if any.
    static func read(cacheDirectory: String) -> pid_t? {
        guard let text = try? String(contentsOfFile: path(cacheDirectory: cacheDirectory), encoding: .utf8) else { return nil }
        return pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The running `hlscache serve` the file names: the process exists and its command line has `serve`.
    static func runningServer(cacheDirectory: String) -> pid_t? {
        guard let pid = read(cacheDirectory: cacheDirectory), pid > 0, kill(pid, 0) == 0 || errno == EPERM else { return nil }
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return pid }
        let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return arguments.contains("serve") ? pid : nil
    }
}
