import ArgumentParser
import HLSDownloader

/// `hlscache unlock ID`: the item's objects become evictable again (unless another locked item lists them).
struct UnlockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unlock", abstract: "Unlock an item's objects.")

    @OptionGroup var cache: CacheOptions

    @OptionGroup var selection: ItemSelection

    func run() async throws {
        guard let id = selection.single else { return try await selection.run(.unlock, verb: "unlock", cache: cache) }
        try await ItemContext.with(cache) { context in
            try context.downloader.setLocked(id, false)
            ConsoleOutput.line("\(id): unlocked")
        }
    }
}
