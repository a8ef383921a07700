import ArgumentParser
import HLSDownloader

/// `hlscache rm ID`: stops the item, evicts its objects and forgets it.
struct RemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete an item and evict its objects.")

    @OptionGroup var cache: CacheOptions

    @OptionGroup var selection: ItemSelection

    @Flag(name: .long, help: "Keep the item's record (state deleted) for `ls`.")
    var keepMetadata = false

    func run() async throws {
        guard let id = selection.single else {
            return try await selection.run(.delete, verb: "remove", cache: cache, keepMetadata: keepMetadata)
        }
        try await ItemContext.with(cache) { context in
            try context.downloader.remove(id, keepMetadata: keepMetadata)
            ConsoleOutput.line("\(id): deleted")
        }
    }
}
