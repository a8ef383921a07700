import ArgumentParser
import Foundation
import HLSDownloader

/// `hlscache watch [ID…] [--state S] [--tag T] [--json]`: follows items already queued (by `serve`, a `fetch
/// --detach`, the API) until they settle, from `items.sqlite` — so it works whichever process downloads them.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Follow items' state, progress, speed and ETA until they settle.",
        discussion: """
            Without ids, the items the filters select (without filters: every item queued, downloading or idle now). \
            Exit status 0 when every item ended cached or partiallyCached, 1 otherwise (failed, paused, removed, …), \
            7 for an unknown id. Ctrl-C leaves (the downloads go on).
            """
    )

    @OptionGroup var cache: CacheOptions

    @Argument(help: "Item ids.")
    var ids: [String] = []

    @Option(name: .long, help: "Items in these states, comma-separated (with no ids).")
    var state: String?

    @Option(name: .long, help: "Items with this tag (repeatable: all of them; with no ids).")
    var tag: [String] = []

    @Flag(name: .long, help: "One JSON object per line: the item each time it changes, then a summary.")
    var json = false

    /// How often `items.sqlite` is read.
    static let interval: Duration = .milliseconds(500)

    func validate() throws {
        if !ids.isEmpty && (state != nil || !tag.isEmpty) { throw ValidationError("give ids, or --state/--tag, not both") }
    }

    func run() async throws {
        var query = ItemQuery()
        for name in (state ?? "").split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard let parsed = ItemState(rawValue: name) else {
                throw ValidationError("--state \(name): expected one of \(ItemState.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.states.append(parsed)
        }
        query.tags = tag
        if ids.isEmpty && query.states.isEmpty && tag.isEmpty { query.states = [.queued, .downloading, .idle] }
        let terminal = !json && isatty(STDOUT_FILENO) == 1
        var allCached = true
        try await ItemContext.with(cache) { context in
            try context.items.recoverInterrupted()
            var watched = ids
            if watched.isEmpty {
                watched = try context.items.ids(query)
            } else {
                for id in watched { _ = try context.items.require(id) }
            }
            var last: [String: String] = [:]
            var final: [String: DownloadItem?] = [:]
            while true {
                var changed: [DownloadItem] = []
                var current: [DownloadItem?] = []
                for id in watched {
                    let item = try context.items.item(id)
                    current.append(item)
                    let line = item.map(Self.line) ?? "\(id): removed"
                    if last[id] != line {
                        last[id] = line
                        if let item { changed.append(item) } else { emitRemoved(id) }
                    }
                }
                if terminal {
                    if !changed.isEmpty {
                        // A live table: the screen cleared and drawn again.
                        ConsoleOutput.line(
                            "\u{1B}[H\u{1B}[2J" + Self.header + "\n" + watched.map { last[$0] ?? "" }.joined(separator: "\n"))
                    }
                } else {
                    for item in changed { emit(item) }
                }
                if current.allSatisfy({ $0?.state.isSettled ?? true }) {
                    for (id, item) in zip(watched, current) { final[id] = item }
                    break
                }
                try? await Task.sleep(for: Self.interval)
            }
            let missed = watched.filter { id in
                guard let item = final[id] ?? nil else { return true }
                return item.state != .cached && item.state != .partiallyCached
            }
            allCached = missed.isEmpty
            if json {
                ConsoleOutput.line(
                    ItemFormatter.json([
                        "event": "done", "items": watched.count, "cached": watched.count - missed.count, "notCached": missed,
                    ]))
            } else if missed.isEmpty {
                ConsoleOutput.line("all \(watched.count) cached")
            } else {
                let list = missed.map { id in "\(id) (\((final[id] ?? nil)?.state.rawValue ?? "removed"))" }
                ConsoleOutput.line("\(missed.count) of \(watched.count) not cached: " + list.joined(separator: ", "))
            }
        }
        if !allCached { throw ExitCode(1) }
    }

    private func emit(_ item: DownloadItem) {
        if json {
            var object = ItemFormatter.dictionary(item)
            object["event"] = "item"
            object["percent"] = Self.percent(item)
            ConsoleOutput.line(ItemFormatter.json(object))
        } else {
            ConsoleOutput.line(Self.line(item))
        }
    }

    private func emitRemoved(_ id: String) {
        ConsoleOutput.line(json ? ItemFormatter.json(["event": "removed", "id": id]) : "\(id): removed")
    }

    static let header = "ID".padding(14) + "STATE".padding(16) + "DONE".padding(8) + "SPEED".padding(14) + "ETA"

    /// `id  downloading  42.0%  1.2 MiB/s  12 s`.
    static func line(_ item: DownloadItem) -> String {
        let speed = item.speed()
        let rate = speed.bytesPerSecond.map { "\(ItemFormatter.bytes(Int64($0)))/s" } ?? "-"
        let eta = speed.etaSeconds.map { "\(Int($0.rounded(.up))) s" } ?? "-"
        let error = item.errorCode.map { " (\($0))" } ?? ""
        return item.id.padding(14) + (item.state.rawValue + error).padding(16) + String(format: "%.1f%%", percent(item)).padding(8)
            + rate.padding(14) + eta
    }

    /// By segments when their count is known, else by bytes.
    static func percent(_ item: DownloadItem) -> Double {
        if item.segmentsTotal > 0 { return min(100, Double(item.segmentsDone) * 100 / Double(item.segmentsTotal)) }
        if item.bytesTotal > 0 { return min(100, Double(item.bytesDone) * 100 / Double(item.bytesTotal)) }
        return 0
    }
}
