import ArgumentParser
import HLSDownloader

/// `hlscache lock ID`: the item's objects are never evicted (objects it downloads later are locked too).
struct LockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "lock", abstract: "Lock an item's objects against eviction.")

    @OptionGroup var cache: CacheOptions

    @OptionGroup var selection: ItemSelection

    func run() async throws {
        guard let id = selection.single else { return try await selection.run(.lock, verb: "lock", cache: cache) }
        try await ItemContext.with(cache) { context in
            try context.downloader.setLocked(id, true)
            ConsoleOutput.line("\(id): locked")
        }
    }
}
