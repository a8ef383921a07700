import ArgumentParser
import HLSDownloader

/// `ID…`, or `--state S --tag T` or `--all`, of `pause`, `resume`, `rm`, `lock` and `unlock`.
struct ItemSelection: ParsableArguments {
    @Argument(help: "Item ids (or select them with --state, --tag or --all).")
    var ids: [String] = []

    @Option(name: .long, help: "Act on the items in these states, comma-separated.")
    var state: String?

    @Option(name: .long, help: "Act on the items with this tag (repeatable: all of them).")
    var tag: [String] = []

    @Flag(name: .long, help: "Act on every item.")
    var all = false

    @Flag(name: .long, help: "Act even when more than 20 items are selected (otherwise they are listed, nothing is done).")
    var yes = false

    /// More than this many selected items are only listed without `--yes`.
    static let dryRunAbove = 20

    /// One id given, nothing else: the command's single-item form (its own messages and exit statuses).
    var single: String? { ids.count == 1 && state == nil && tag.isEmpty && !all ? ids[0] : nil }

    func validate() throws {
        let filtered = state != nil || !tag.isEmpty
        if !ids.isEmpty && (filtered || all) { throw ValidationError("give ids, or --state/--tag, or --all: one of them") }
        if filtered && all { throw ValidationError("--all selects every item: give it without --state/--tag") }
        if ids.isEmpty && !filtered && !all { throw ValidationError("give an item id, --state/--tag, or --all") }
        _ = try query()
    }

    func query() throws -> ItemQuery {
        var query = ItemQuery()
        for name in (state ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard let parsed = ItemState(rawValue: name) else {
                throw ValidationError("--state \(name): expected one of \(ItemState.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.states.append(parsed)
        }
        query.tags = tag
        return query
    }

    /// Runs `action` on every selected item, through the code of `POST /api/v1/items/batch`
    /// (``Downloader/act(_:on:keepMetadata:)``): one line per item; past 20 items without `--yes`, only the list.
    /// Exit status 1 when the action failed for an item (the others are done).
    func run(_ action: BatchAction, verb: String, cache: CacheOptions, keepMetadata: Bool = false) async throws {
        var failed = 0
        try await ItemContext.with(cache) { context in
            try context.items.recoverInterrupted()
            let selected = ids.isEmpty ? try context.items.ids(try query()) : ids
            if selected.count > Self.dryRunAbove && !yes {
                ConsoleOutput.line("would \(verb) \(selected.count) items (give --yes to act): " + selected.joined(separator: " "))
                return
            }
            for id in selected {
                do throws(DownloadError) {
                    let item = try context.downloader.act(action, on: id, keepMetadata: keepMetadata)
                    ConsoleOutput.line("\(id): \(item.map { $0.state.rawValue + ($0.locked ? ", locked" : "") } ?? "deleted")")
                } catch {
                    failed += 1
                    ConsoleOutput.line("\(id): \(error.code): \(error.message)")
                }
            }
            if selected.isEmpty { ConsoleOutput.line("no item selected") }
        }
        if failed > 0 {
            ConsoleOutput.error("hlscache: \(verb) failed for \(failed) item\(failed == 1 ? "" : "s")")
            throw ExitCode(1)
        }
    }
}
