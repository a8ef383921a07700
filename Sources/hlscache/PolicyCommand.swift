import ArgumentParser
import Foundation
import HLSConfig

/// `hlscache policy show|set`: the download policies a running server may change (docs/api.md#policies), kept in
/// the cache directory's `policies.json` over the configuration.
struct PolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Show or change the download policies.",
        subcommands: [Show.self, Set.self]
    )

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every policy in effect; (stored) marks a value set at run time.")

        @OptionGroup var cache: CacheOptions

        func run() async throws {
            let loaded = try cache.load()
            let directory = loaded.settings.resolvedCacheDirectory(environment: ProcessInfo.processInfo.environment)
            let stored = try RuntimePolicies.load(directory: directory)
            let effective = try stored.applied(to: loaded.settings)
            for (key, value) in RuntimePolicies.effective(effective).sorted(by: { $0.key < $1.key }) {
                ConsoleOutput.line("\(key) = \(value)\(stored.values[key] != nil ? " (stored)" : "")")
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Store policies (KEY=VALUE as in the config file; KEY=~reset removes one) and tell the running server.")

        @OptionGroup var cache: CacheOptions

        @Argument(help: "KEY=VALUE, e.g. downloads.rateLimit=2MiB downloads.window=22:00-06:00")
        var changes: [String]

        func run() async throws {
            var values: [String: String] = [:]
            for change in changes {
                guard let equals = change.firstIndex(of: "=") else {
                    ConsoleOutput.error("hlscache: \(change): expected KEY=VALUE")
                    throw ExitCode(64)
                }
                values[String(change[..<equals])] = String(change[change.index(after: equals)...])
            }
            let loaded = try cache.load()
            let directory = loaded.settings.resolvedCacheDirectory(environment: ProcessInfo.processInfo.environment)
            let next: RuntimePolicies
            do throws(SettingsError) {
                next = try RuntimePolicies.load(directory: directory).changing(values, over: loaded.settings)
            } catch {
                ConsoleOutput.error("hlscache: \(error.message)")
                throw ExitCode(64)
            }
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try next.save(directory: directory)
            if let pid = ServePIDFile.runningServer(cacheDirectory: directory), kill(pid, SIGHUP) == 0 {
                ConsoleOutput.line("stored; the server of \(directory) (pid \(pid)) applies it now")
            } else {
                ConsoleOutput.line("stored; a server of \(directory) applies it when it starts")
            }
        }
    }
}
