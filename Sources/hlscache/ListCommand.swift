import ArgumentParser
import Foundation
import HLSDownloader

/// `hlscache ls`: the items of a cache directory.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ls", abstract: "List the items (prewarmed streams).")

    @OptionGroup var cache: CacheOptions

    @Option(
        name: .long,
        help:
            "Only items in these states, comma-separated (queued, ready, downloading, recording, paused, idle, cached, partiallyCached, evicted, failed, expired, deleted)."
    )
    var state: String?

    @Option(name: .long, help: "Only items with this tag (repeatable: all of them).")
    var tag: [String] = []

    @Flag(name: .long, help: "Only items never played through the proxy.")
    var neverPlayed = false

    @Flag(name: .long, help: "Only items played through the proxy at least once.")
    var played = false

    @Flag(name: .long, help: "Only locked items.")
    var locked = false

    @Flag(name: .long, help: "Only items not locked.")
    var unlocked = false

    @Option(name: .long, help: "Only items whose title or URL contains this text (ignoring case).")
    var search: String?

    @Option(name: .long, help: "Only items whose URL contains this text.")
    var url: String?

    @Option(
        name: .long,
        help: "Sort by createdAt, updatedAt, title, state, bytes, expiresAt, completedAt or id; - first for descending (--sort=-updatedAt)."
    )
    var sort: String?

    @Option(name: .long, help: "At most this many items; when more follow, the cursor of the next page goes to stderr.")
    var limit: Int?

    @Option(name: .long, help: "Start after this cursor (printed after a page cut short by --limit; the same --sort).")
    var after: String?

    @Flag(name: .long, help: "One JSON object per line.")
    var json = false

    func run() async throws {
        var query = ItemQuery()
        for name in (state ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard let parsed = ItemState(rawValue: name) else {
                throw ValidationError("--state \(name): expected one of \(ItemState.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.states.append(parsed)
        }
        query.tags = tag
        if neverPlayed && played { throw ValidationError("give --played or --never-played, not both") }
        if locked && unlocked { throw ValidationError("give --locked or --unlocked, not both") }
        if neverPlayed { query.played = false }
        if played { query.played = true }
        if locked { query.locked = true }
        if unlocked { query.locked = false }
        if let search, !search.isEmpty { query.text = search }
        query.urlContains = url
        if var sort {
            if sort.hasPrefix("-") {
                query.descending = true
                sort.removeFirst()
            }
            guard let parsed = ItemQuery.Sort(rawValue: sort) else {
                throw ValidationError("--sort \(sort): expected one of \(ItemQuery.Sort.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.sort = parsed
        }
        if let limit {
            guard limit > 0 else { throw ValidationError("--limit \(limit): expected 1 or more") }
            query.limit = limit
        }
        if let after {
            guard let cursor = ItemQuery.Cursor(token: after) else {
                throw ValidationError("--after: not a cursor (give the one printed after a page)")
            }
            guard cursor.sort == query.sort, cursor.descending == query.descending else {
                throw ValidationError(
                    "--after: a cursor of --sort \(cursor.descending ? "-" : "")\(cursor.sort.rawValue); give the same --sort as its page")
            }
            query.after = cursor
        }
        try await ItemContext.with(cache) { context in
            try context.items.recoverInterrupted()
            try context.downloader.expireDue()
            let page = try context.items.page(query)
            let items = page.items
            // On stderr, so that the listing itself (--json lines) stays the items alone.
            defer { if let next = page.nextCursor { ConsoleOutput.error("more items: --after \(next.token)") } }
            if json {
                for item in items {
                    ConsoleOutput.line(
                        ItemFormatter.json(ItemFormatter.dictionary(item, offline: try context.downloader.offlineStatus(of: item))))
                }
                return
            }
            ConsoleOutput.line(
                "ID".padding(14) + "STATE".padding(16) + "BYTES".padding(22) + "SEGMENTS".padding(10) + "SECONDS".padding(8)
                    + "TITLE".padding(24)
                    + "TAGS".padding(16) + "URL")
            for item in items {
                let bytes = "\(ItemFormatter.bytes(item.bytesDone))/\(ItemFormatter.bytes(item.bytesTotal))"
                let state = item.state.rawValue + (item.locked ? "*" : "")
                ConsoleOutput.line(
                    item.id.padding(14) + state.padding(16) + bytes.padding(22) + "\(item.segmentsDone)/\(item.segmentsTotal)".padding(10)
                        + (item.precacheSeconds == 0 ? "all" : "\(item.precacheSeconds)").padding(8) + Self.cell(item.title ?? "-", 24)
                        + Self.cell(item.tags.isEmpty ? "-" : item.tags.joined(separator: ","), 16) + item.url)
            }
        }
    }
}

extension ListCommand {
    /// `text` cut to fit `width` columns (a long title does not push the URL off the line).
    static func cell(_ text: String, _ width: Int) -> String {
        (text.count < width ? text : String(text.prefix(width - 2)) + "…").padding(width)
    }
}

extension String {
    /// Left-aligned in `width` columns, with at least one space after.
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
