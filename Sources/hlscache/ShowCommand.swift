import ArgumentParser
import Foundation
import HLSDownloader

/// `hlscache show ID`: one item in detail.
struct ShowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one item in detail.")

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The item id.")
    var id: String

    @Flag(name: .long, help: "Print a JSON object.")
    var json = false

    @OptionGroup var proxyBase: ProxyBaseOption

    func run() async throws {
        try await ItemContext.with(cache) { context in
            try context.items.recoverInterrupted()
            try context.downloader.expireDue()
            let item = try context.items.require(id)
            let resources = try context.items.resources(id)
            var object = ItemFormatter.dictionary(
                item, proxyBase: proxyBase.base(context), offline: try context.downloader.offlineStatus(of: item))
            object["resources"] = resources.count
            object["resourcesDone"] = resources.count { $0.done }
            // Seconds stored per rendition: in all, and from its start without a gap (what plays offline).
            let storage = try context.downloader.renditionStorage(of: id)
            if json {
                object["renditionsStored"] = storage.map { r -> [String: Any] in
                    [
                        "url": r.url, "seconds": (r.seconds * 1000).rounded() / 1000,
                        "storedSeconds": (r.storedSeconds * 1000).rounded() / 1000,
                        "storedFromStart": (r.storedFromStart * 1000).rounded() / 1000,
                    ]
                }
            } else {
                object["renditionsStored"] = storage.map {
                    String(format: "%.1f of %.1f s stored, %.1f s from the start  ", $0.storedSeconds, $0.seconds, $0.storedFromStart)
                        + $0.url
                }
            }
            // Playback through `serve` (the SDKs' "record consumption").
            if let played = try context.items.consumption(id) {
                object["lastPlayedAt"] = ItemFormatter.iso(played.lastPlayedAt) ?? ""
                object["servedSeconds"] = (played.servedSeconds * 1000).rounded() / 1000
                object["served"] = played.served.map { String(format: "%.3f-%.3f", $0[0], $0[1]) }
            }
            let keys = try context.downloader.keyStatus(of: id)
            if json {
                if !keys.isEmpty { object["keys"] = keys.map(ItemFormatter.dictionary) }
                ConsoleOutput.line(ItemFormatter.json(object))
                return
            }
            // `keys:` one line per key (every method): id, host, state and until when it is served.
            if !keys.isEmpty { object["keys"] = keys.map(ItemFormatter.line) }
            for key in object.keys.sorted() {
                let value = object[key]!
                if key == "meta",
                    let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
                {
                    ConsoleOutput.line("meta: " + String(decoding: data, as: UTF8.self))
                } else if let list = value as? [String] {
                    ConsoleOutput.line("\(key):" + (list.isEmpty ? " -" : ""))
                    for entry in list { ConsoleOutput.line("  \(entry)") }
                } else {
                    ConsoleOutput.line("\(key): \(value)")
                }
            }
        }
    }
}
