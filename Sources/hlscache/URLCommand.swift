import ArgumentParser
import HLSCacheCore

/// `hlscache url ORIGIN_URL`: prints the proxy URL to give a player.
struct URLCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "url",
        abstract: "Print the proxy URL of an origin URL.",
        discussion: "Example: hlscache url https://cdn.example.com/vod/master.m3u8 prints http://127.0.0.1:8080/https/cdn.example.com/vod/master.m3u8"
    )

    @Argument(help: "The origin URL (http or https).")
    var originURL: String

    @Option(name: .long, help: "The proxy's base URL.")
    var proxy: String = "http://127.0.0.1:8080"

    func run() throws {
        do {
            print(try OriginURL(originURL).proxyURL(base: proxy))
        } catch let error as OriginURLError {
            throw ValidationError("cannot proxy \(originURL): \(error)")
        }
    }
}
