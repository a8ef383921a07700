import ArgumentParser
import Foundation
import HLSConfig

/// `hlscache reload`: asks the running `serve` of a cache directory to read its configuration again (`SIGHUP`).
struct ReloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reload",
        abstract: "Ask the running server of the cache directory to reload its configuration (SIGHUP).",
        discussion: """
            The server reads its config file and environment again: a bad file changes nothing (its log names the key), \
            the settings a running server can change are applied, the others are reported as needing a restart — in \
            its log and in GET /api/v1/status (configuration). Connections, downloads and items are untouched.
            """
    )

    @OptionGroup var cache: CacheOptions

    func run() async throws {
        let loaded = try cache.load()
        let directory = loaded.settings.resolvedCacheDirectory(environment: ProcessInfo.processInfo.environment)
        guard let pid = ServePIDFile.runningServer(cacheDirectory: directory) else {
            ConsoleOutput.error(
                "hlscache: no running server of \(directory) (no live process in \(ServePIDFile.path(cacheDirectory: directory)))")
            throw ExitCode(69)
        }
        guard kill(pid, SIGHUP) == 0 else {
            ConsoleOutput.error("hlscache: cannot signal the server (pid \(pid)): \(String(cString: strerror(errno)))")
            throw ExitCode(77)
        }
        ConsoleOutput.line("asked the server of \(directory) (pid \(pid)) to reload; its log and GET /api/v1/status say what changed")
    }
}
