import ArgumentParser
import HLSCacheCore
import HLSConfig

/// `hlscache url ORIGIN_URL`: prints the proxy URL to give a player.
struct URLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url",
        abstract: "Print the proxy URL of an origin URL.",
        discussion: "Example: hlscache url https://cdn.example.com/vod/master.m3u8 prints http://127.0.0.1:8080/https/cdn.example.com/vod/master.m3u8"
    )

    @Argument(help: "The origin URL (http or https).")
    var originURL: String

    @OptionGroup var proxyBase: ProxyBaseOption

    @Option(name: .long, help: SettingsOptions.configHelp)
    var config: String?

    func run() throws {
        let base: String
        if let proxy = proxyBase.proxy {
            base = proxy
        } else {
            let listen = try SettingsOptions.load(configFile: config, commandLine: CommandLineSettings()).settings.listen
            base = listen.localBaseURL
        }
        do {
            ConsoleOutput.line(try OriginURL(originURL).proxyURL(base: base))
        } catch let error as OriginURLError {
            throw ValidationError("cannot proxy \(originURL): \(error)")
        }
    }
}
