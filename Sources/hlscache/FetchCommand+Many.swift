import ArgumentParser
import Foundation
import HLSCacheCore
import HLSDownloader

/// One stream of `fetch URL URL…` or `fetch --from FILE`.
struct FetchListEntry: Equatable {
    var url: String
    var title: String?

    /// The largest list file read.
    static let maxFileBytes = 16 << 20

    /// A list of URLs: one per line, or an M3U list (`#EXTINF:-1 tvg-id="…",Title` before a URL gives its title).
    /// Blank lines and other `#` lines are skipped.
    static func parse(_ text: String) -> [FetchListEntry] {
        var entries: [FetchListEntry] = []
        var title: String?
        for raw in text.split(omittingEmptySubsequences: true, whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            if line.hasPrefix("#EXTINF:") {
                title = extinfTitle(line)
                continue
            }
            if line.hasPrefix("#") { continue }
            entries.append(FetchListEntry(url: line, title: title))
            title = nil
        }
        return entries
    }

    /// The text after the first comma outside quotes (attribute values such as `tvg-name="A, B"` may hold commas).
    static func extinfTitle(_ line: String) -> String? {
        var quoted = false
        for index in line.indices {
            switch line[index] {
            case "\"": quoted.toggle()
            case "," where !quoted:
                let title = line[line.index(after: index)...].trimmingCharacters(in: .whitespaces)
                return title.isEmpty ? nil : title
            default: continue
            }
        }
        return nil
    }
}

extension FetchCommand {
    /// The options that name one item only.
    func validateMany() throws {
        let single: [(String, Bool)] = [
            ("--id", id != nil), ("--title", title != nil), ("--poster", poster != nil), ("--dry-run", dryRun),
            ("--no-start", noStart), ("--poster-only", posterOnly),
        ]
        if let given = single.first(where: { $0.1 }) {
            throw ValidationError("\(given.0) names one item: give one URL (several URLs or --from make one item each)")
        }
    }

    func readList() throws -> [FetchListEntry] {
        var entries = urls.map { FetchListEntry(url: $0, title: nil) }
        guard let from else { return entries }
        let handle: FileHandle
        if from == "-" {
            handle = FileHandle.standardInput
        } else {
            guard let file = FileHandle(forReadingAtPath: from) else { throw ValidationError("--from \(from): cannot open the file") }
            handle = file
        }
        let data = (try? handle.read(upToCount: FetchListEntry.maxFileBytes + 1)) ?? Data()
        guard data.count <= FetchListEntry.maxFileBytes else {
            throw ValidationError("--from \(from): larger than \(FetchListEntry.maxFileBytes >> 20) MiB; split the list")
        }
        entries += FetchListEntry.parse(String(decoding: data, as: UTF8.self))
        guard !entries.isEmpty else { throw ValidationError("--from \(from): no URL in it") }
        return entries
    }

    /// Records every stream not recorded yet (one transaction), prints a result per stream (`created`, `exists` —
    /// an item of that URL is recorded — or `refused` with the reason), then downloads the created ones in turn
    /// (unless `--detach`). Exit status: the first failed item's, else 64 when an entry was refused.
    func runMany() async throws {
        let printer = ProgressPrinter(json: json)
        let entries = try readList()
        let selection: RenditionSelection
        do {
            selection = try RenditionSelection(variants: variants, audio: audio, subtitles: subtitles, iFrames: iframes)
        } catch {
            throw ValidationError(error.message)
        }
        let options = try metadata()
        try await ItemContext.with(
            cache, origins: origins, rate: rate.flatMap(ByteSize.init)?.bytes, failFast: failFast,
            through: through.flatMap { try? OriginURL($0) },
            onEvent: { printer.handle($0) }
        ) { context in
            let proxy = proxyBase.base(context)
            try context.items.recoverInterrupted()
            try context.downloader.expireDue()
            var accepted: [(item: DownloadItem, matchURL: Bool)] = []
            var refusals: [Int: String] = [:]
            for (index, entry) in entries.enumerated() {
                do {
                    _ = try OriginURL(entry.url)
                } catch {
                    refusals[index] = "not a stream URL: \(error)"
                    continue
                }
                var item = DownloadItem(
                    id: DownloadItem.generateID(), url: entry.url, selection: selection,
                    precacheSeconds: seconds ?? context.downloader.configuration.defaultSeconds,
                    expiresAt: expiryDate, locked: lock, headers: header.compactMap(HeaderField.init(parsing:)))
                item.through = through.flatMap { try? OriginURL($0) }.map { "\($0.scheme)://\($0.authority)" }
                options.apply(to: &item)
                do throws(ItemMetadata.Problem) {
                    item.title = try entry.title.map(ItemMetadata.title)
                } catch {
                    refusals[index] = error.message
                    continue
                }
                accepted.append((item, true))
            }
            let existing = try context.items.insertNew(accepted)
            var created: [String] = []
            var next = 0
            for (index, entry) in entries.enumerated() {
                var object: [String: Any] = ["event": "entry", "index": index, "url": entry.url]
                if let reason = refusals[index] {
                    object["result"] = "refused"
                    object["message"] = reason
                } else {
                    let id = existing[next] ?? accepted[next].item.id
                    object["result"] = existing[next] == nil ? "created" : "exists"
                    object["id"] = id
                    object["proxyURL"] = (try? OriginURL(entry.url).proxyURL(base: proxy)) ?? entry.url
                    if existing[next] == nil { created.append(id) }
                    next += 1
                }
                if json {
                    printer.emit(ItemFormatter.json(object))
                } else if let reason = refusals[index] {
                    printer.emit("refused \(entry.url): \(reason)")
                } else {
                    printer.emit("\(object["result"]!) \(object["id"]!): play \(object["proxyURL"]!)")
                }
            }
            if !detach {
                var failure: (any Error)?
                for id in created {
                    do {
                        try await ForegroundDownload.run(id, context: context, printer: printer, proxyBase: proxy)
                    } catch let error as DownloadError where error == .cancelled {
                        throw error  // Ctrl-C: the rest stay queued (`serve` or `resume` downloads them)
                    } catch {
                        failure = failure ?? error
                    }
                }
                if let failure { throw failure }
            } else if !json {
                printer.emit("queued; a running `hlscache serve` on this cache directory downloads them")
            }
            if !refusals.isEmpty {
                ConsoleOutput.error("hlscache: \(refusals.count) of \(entries.count) entries refused")
                throw ExitCode(64)
            }
        }
    }
}

extension FetchCommand {
    /// `--poster-only` (PCD `VOCItemDownloadThumbnailOnly`): the poster stored now, nothing else; the item stays as it
    /// is (`ready` when new). A poster the origin refuses exits 1 with the reason (kept as the item's `posterError`).
    func storePosterOnly(_ id: String, context: ItemContext, printer: ProgressPrinter, proxy: String) async throws {
        let stored: DownloadItem
        do {
            stored = try await context.downloader.storePoster(of: id)
        } catch {
            let message = "item \(id): the poster was not stored: \(error.message)"
            printer.emit(json ? ItemFormatter.json(["event": "error", "id": id, "message": message]) : message)
            throw ExitCode(1)
        }
        if json {
            var object = ItemFormatter.dictionary(stored, proxyBase: proxy)
            object["event"] = "done"
            printer.emit(ItemFormatter.json(object))
        } else {
            let path = ItemMetadata.posterPath(of: stored).map { " at \(proxy)\($0)" } ?? ""
            printer.emit(
                "\(stored.id): \(stored.state.rawValue), poster stored\(path)"
                    + (stored.state == .ready ? "; `hlscache resume \(stored.id)` downloads the stream" : ""))
        }
    }
}
