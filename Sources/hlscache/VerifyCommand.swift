import ArgumentParser
import HLSDownloader

/// `hlscache verify ID`: re-checks the item against the cache (and its keys against the key store) and corrects
/// it: what was evicted no longer counts (a complete item becomes `partiallyCached` or `evicted`); `resume` then
/// fetches what is missing.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify", abstract: "Re-check an item against the cache and correct it.")

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The item id.")
    var id: String

    @Flag(name: .long, help: "Print a JSON object.")
    var json = false

    func run() async throws {
        try await ItemContext.with(cache) { context in
            try context.items.recoverInterrupted()
            let item = try context.downloader.verify(id)
            let offline = try context.downloader.offlineStatus(of: item)
            if json {
                ConsoleOutput.line(ItemFormatter.json(ItemFormatter.dictionary(item, offline: offline)))
                return
            }
            var line =
                "\(item.id): \(item.state.rawValue), \(ItemFormatter.bytes(item.bytesDone)), \(item.segmentsDone)/\(item.segmentsTotal) segments"
            if item.missingResources > 0 {
                line += ", \(item.missingResources) resource(s) missing (`hlscache resume \(item.id)` fetches them)"
            }
            line +=
                offline.playable
                ? ", playable offline" + (ItemFormatter.iso(offline.until).map { " until \($0)" } ?? "") : ", not playable offline"
            ConsoleOutput.line(line)
        }
    }
}
