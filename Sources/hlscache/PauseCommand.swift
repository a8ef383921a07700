import ArgumentParser
import HLSDownloader

/// `hlscache pause ID`: stops a download (in whichever process runs it) until `resume`.
struct PauseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "pause", abstract: "Pause an item's download.")

    @OptionGroup var cache: CacheOptions

    @OptionGroup var selection: ItemSelection

    func run() async throws {
        guard let id = selection.single else { return try await selection.run(.pause, verb: "pause", cache: cache) }
        try await ItemContext.with(cache) { context in
            try context.items.recoverInterrupted()
            let item = try context.downloader.pause(id)
            ConsoleOutput.line("\(item.id): \(item.state.rawValue)")
        }
    }
}
