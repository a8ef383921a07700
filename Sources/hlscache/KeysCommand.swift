import ArgumentParser
import Foundation
import HLSCacheCore
import HLSConfig
import HLSKeys
import HLSOrigin
import Logging
import NIOPosix

/// `hlscache keys`: the keys in the key store (every method: AES-128, SAMPLE-AES, AES-256, …).
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "List and renew the cached keys (every key method).",
        subcommands: [KeysListCommand.self, KeysRenewCommand.self]
    )
}

/// Where the cache is, for the `keys` commands.
struct KeyStoreOptions: ParsableArguments {
    @Option(name: .long, help: SettingsOptions.configHelp)
    var config: String?

    @Option(name: .long, help: "Cache directory (cache.dir). Default: $HLSCACHE_CACHE_DIR, $XDG_CACHE_HOME/hlscache or ~/.cache/hlscache.")
    var cacheDir: String?

    /// The layered settings with `--cache-dir` and `more`.
    func load(_ more: CommandLineSettings = CommandLineSettings()) throws -> LoadedSettings {
        var commandLine = more
        commandLine.set("cache.dir", cacheDir)
        return try SettingsOptions.load(configFile: config, commandLine: commandLine)
    }

    /// Opens the key service; `nil` when the cache has no key store yet.
    func open(settings: HLSCacheSettings, configuration: KeyConfiguration, fetcher: any KeyFetcher, logger: Logger) throws -> KeyService? {
        let directory = settings.resolvedCacheDirectory(environment: ProcessInfo.processInfo.environment)
        guard FileManager.default.fileExists(atPath: directory + "/keys.sqlite") else { return nil }
        do throws(KeyError) {
            let masterKey = try MasterKey.load(directory: directory, environment: ProcessInfo.processInfo.environment)
            return try KeyService(
                directory: directory, configuration: configuration, masterKey: masterKey, fetcher: fetcher, logger: logger)
        } catch {
            throw CacheOpenFailure.report("the key store", directory: directory, error)
        }
    }
}

/// `hlscache keys ls [--json]`.
struct KeysListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List registered keys: id, origin host, expiry and state (never the key bytes).")

    @OptionGroup var store: KeyStoreOptions

    @Flag(name: .long, help: "Print JSON instead of a table.")
    var json = false

    struct Entry: Codable {
        var id: String
        var host: String
        var state: String
        var expiresAt: Date?
        var fetchedAt: Date?
        var registeredAt: Date
        var lastError: String?
    }

    func run() async throws {
        let settings = try store.load().settings
        // Listing never fetches; the service still wants a fetcher.
        let origin = OriginClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: OriginConfiguration(), logger: Logger(label: "hlscache"))
        let opened = Result { () throws -> (KeyService?, [KeyRecord]) in
            let keys = try store.open(
                settings: settings, configuration: settings.keyConfiguration(), fetcher: origin, logger: Logger(label: "hlscache"))
            do {
                return (keys, try keys?.list() ?? [])
            } catch {
                throw ValidationError("cannot read the key store: \(error)")
            }
        }
        try? await origin.shutdown()
        let (keys, records) = try opened.get()
        let entries = records.map { record in
            Entry(
                id: record.id.value, host: record.host, state: keys.map { $0.state(of: record).rawValue } ?? "pending",
                expiresAt: record.expiresAt, fetchedAt: record.fetchedAt, registeredAt: record.registeredAt, lastError: record.lastError)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.dateEncodingStrategy = .iso8601
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            ConsoleOutput.line(String(decoding: try encoder.encode(entries), as: UTF8.self))
            return
        }
        let formatter = ISO8601DateFormatter()
        let rows =
            [["ID", "HOST", "EXPIRES", "STATE"]]
            + entries.map { [$0.id, $0.host, $0.expiresAt.map(formatter.string(from:)) ?? "-", $0.state] }
        let widths = (0..<4).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            ConsoleOutput.line(
                row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }.joined(separator: "  ")
                    .trimmingCharacters(in: .whitespaces))
        }
    }
}

/// `hlscache keys renew ID`.
struct KeysRenewCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "renew", abstract: "Fetch a key from its origin again now and store it with a new expiry.")

    @Argument(help: "The key id (32 hex digits, as `hlscache keys ls` shows).")
    var id: String

    @OptionGroup var store: KeyStoreOptions
    @OptionGroup var origins: OriginOptions

    @Option(name: .customLong("key-ttl"), help: "The TTL to apply, as for serve (e.g. 24h; 'none'). Default 24h (keys.ttl).")
    var keyTTL: String?

    func run() async throws {
        guard let keyID = KeyID(id) else { throw ValidationError("\(id): a key id is 32 hexadecimal digits") }
        var commandLine = CommandLineSettings()
        commandLine.set("keys.ttl", keyTTL)
        try origins.add(to: &commandLine)
        let settings = try store.load(commandLine).settings
        let configuration = settings.keyConfiguration()
        let logger = Logger(label: "hlscache")
        let origin = OriginClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: settings.originConfiguration(), logger: logger)
        let result: Result<KeyRecord, KeyError>
        let opened: KeyService?
        do {
            opened = try store.open(settings: settings, configuration: configuration, fetcher: origin, logger: logger)
        } catch {
            try? await origin.shutdown()  // a client dropped without shutdown traps in debug builds
            throw error
        }
        guard let keys = opened else {
            try? await origin.shutdown()
            throw ValidationError("no key store in \(settings.resolvedCacheDirectory(environment: ProcessInfo.processInfo.environment))")
        }
        do throws(KeyError) {
            result = .success(try await keys.renew(keyID))
        } catch {
            result = .failure(error)
        }
        try? await origin.shutdown()
        switch result {
        case .success(let record):
            let expiry = record.expiresAt.map { ISO8601DateFormatter().string(from: $0) } ?? "never"
            ConsoleOutput.line("renewed \(record.id) from \(record.host), expires \(expiry)")
        case .failure(let error):
            // A runtime failure, not a bad option: one line and the item commands' statuses (4 notFound, 6 for
            // a failing key database, 3 otherwise), without the usage text.
            ConsoleOutput.error("hlscache: \(error.code): cannot renew \(keyID): \(error.message)")
            switch error {
            case .notFound: throw ExitCode(4)
            case .storage: throw ExitCode(6)
            default: throw ExitCode(3)
            }
        }
    }
}
