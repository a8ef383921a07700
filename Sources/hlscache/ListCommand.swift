import ArgumentParser
import Foundation
import HLSDownloader

/// `hlscache ls`: the items of a cache directory.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the items (prewarmed streams).")

    @OptionGroup var cache: CacheOptions

    @Option(name: .long, help: "Only items in this state (queued, downloading, paused, idle, cached, partiallyCached, evicted, failed, expired, deleted).")
    var state: String?

    @Flag(name: .long, help: "One JSON object per line.")
    var json = false

    func run() async throws {
        var filter: ItemState?
        if let state {
            guard let parsed = ItemState(rawValue: state) else {
                throw ValidationError("--state \(state): expected one of \(ItemState.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            filter = parsed
        }
        try await ItemContext.with(cache) { context in
            try context.items.recoverInterrupted()
            try context.downloader.expireDue()
            let items = try context.items.items(state: filter)
            if json {
                for item in items {
                    ConsoleOutput.line(ItemFormatter.json(ItemFormatter.dictionary(item, offline: try context.downloader.offlineStatus(of: item))))
                }
                return
            }
            ConsoleOutput.line("ID".padding(14) + "STATE".padding(16) + "BYTES".padding(22) + "SEGMENTS".padding(10) + "SECONDS".padding(8) + "URL")
            for item in items {
                let bytes = "\(ItemFormatter.bytes(item.bytesDone))/\(ItemFormatter.bytes(item.bytesTotal))"
                let state = item.state.rawValue + (item.locked ? "*" : "")
                ConsoleOutput.line(
                    item.id.padding(14) + state.padding(16) + bytes.padding(22) + "\(item.segmentsDone)/\(item.segmentsTotal)".padding(10)
                        + (item.precacheSeconds == 0 ? "all" : "\(item.precacheSeconds)").padding(8) + item.url)
            }
        }
    }
}

extension String {
    /// Left-aligned in `width` columns, with at least one space after.
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
