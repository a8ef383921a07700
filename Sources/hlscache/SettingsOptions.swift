import ArgumentParser
import Foundation
import HLSConfig

/// Loads the layered settings (flag > `HLSCACHE_*` > config file > default) for any command. A bad value
/// is one line on stderr, `hlscache: config error: KEY = VALUE in SOURCE: PROBLEM`, and exit status 78
/// (EX_CONFIG).
enum SettingsOptions {
    static let configHelp = ArgumentHelp(
        "YAML config file (see Config/hlscache.yaml). Default: $HLSCACHE_CONFIG, else none.", valueName: "FILE")

    static func load(configFile: String?, commandLine: CommandLineSettings) throws -> LoadedSettings {
        do {
            return try SettingsLoader.load(
                configFile: configFile, environment: ProcessInfo.processInfo.environment, commandLine: commandLine)
        } catch {
            ConsoleOutput.error("hlscache: config error: \(error.message)")
            throw ExitCode(78)
        }
    }
}

/// `--proxy BASE`: where printed player URLs point. Default: the configured listen address (`listen`,
/// `$HLSCACHE_LISTEN`, the config file), so `fetch` prints what a `serve` with the same configuration answers.
struct ProxyBaseOption: ParsableArguments {
    @Option(
        name: .long,
        help:
            "The proxy's base URL for printed player URLs. Default: http:// + the configured listen address (a wildcard address prints as loopback)."
    )
    var proxy: String?

    func base(_ context: ItemContext) -> String { proxy ?? context.listenBase }
}
