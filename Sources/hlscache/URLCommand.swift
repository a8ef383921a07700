import ArgumentParser
import HLSCacheCore
import HLSConfig
import HLSDownloader

/// `hlscache url ORIGIN_URL`: prints the proxy URL to give a player.
struct URLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url",
        abstract: "Print the proxy URL of an origin URL.",
        discussion:
            "Example: hlscache url https://cdn.example.com/vod/master.m3u8 prints http://127.0.0.1:8080/https/cdn.example.com/vod/master.m3u8"
    )

    @Argument(help: "The origin URL (http or https); not with --item.")
    var originURL: String?

    @Option(
        name: .long,
        help: "Print the URL of this item's own playlist instead: only the renditions it selected (served by `hlscache serve`).")
    var item: String?

    @Flag(name: .long, help: "With --item: the offline form, whose media playlists end after the part stored.")
    var offline = false

    func validate() throws {
        if (originURL == nil) == (item == nil) { throw ValidationError("give an origin URL or --item ID") }
        if offline && item == nil { throw ValidationError("--offline goes with --item") }
        if let item, !DownloadItem.isValidID(item) { throw ValidationError("--item \(item): not an item id") }
    }

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
        if let item {
            ConsoleOutput.line(ItemFormatter.joined(base, DownloadItem.playbackPath(of: item, offline: offline)))
            return
        }
        let originURL = self.originURL ?? ""
        do {
            ConsoleOutput.line(try OriginURL(originURL).proxyURL(base: base))
        } catch let error as OriginURLError {
            throw ValidationError("cannot proxy \(originURL): \(error)")
        }
    }
}
