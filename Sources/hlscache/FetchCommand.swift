import ArgumentParser
import Foundation
import HLSCacheCore
import HLSDownloader

/// `hlscache fetch URL`: prewarms a stream — its playlists and the first N seconds of every selected rendition.
struct FetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch",
        abstract: "Prewarm a stream (or its first N seconds).",
        discussion: """
            Prints the proxy URL to give the player, then the progress. The item is recorded in the cache \
            directory: see `hlscache ls`, `show`, `pause`, `resume`, `rm`, `lock`. A live stream is refused unless \
            --record is given: then the item follows the channel and stores every new segment until --duration, \
            --until, the end of the stream, `hlscache pause` or `rm`; it plays at `hlscache url --item ID` while it \
            records and after (docs/fetch.md#live).
            """
    )

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The origin URL of the master (multivariant) or media playlist; several: one item each, downloaded in turn.")
    var urls: [String] = []

    @Option(
        name: .long,
        help: "A file of URLs, one per line, or an M3U list whose #EXTINF titles become the items' titles ('-': standard input).")
    var from: String?

    /// The one URL of a single fetch.
    var url: String { urls.first ?? "" }

    /// More than one stream: `fetch URL URL…` or `--from FILE`.
    var isMany: Bool { urls.count > 1 || from != nil }

    @Option(
        name: .long,
        help: "Seconds to precache from the start of every rendition; 0 = the whole stream (0…32767). Default: downloads.defaultSeconds."
    )
    var seconds: Int?

    @Option(name: .long, help: "Variants: all, best, worst, or a bandwidth cap in bits/s (e.g. 800k).")
    var variants: String = "all"

    @Option(name: .long, help: "Audio renditions: all, none, or languages (en,fr).")
    var audio: String = "all"

    @Option(name: .long, help: "Subtitle renditions: all, none, or languages (en,fr).")
    var subtitles: String = "all"

    @Flag(name: .long, help: "Also download I-frame playlists.")
    var iframes = false

    @Option(name: .long, help: "Expire the item after this long (45m, 12h, 7d, 2w): its objects are evicted.")
    var expires: String?

    @Option(name: .long, help: "Expire the item at this date (ISO 8601, e.g. 2026-12-01T00:00:00Z); not in the past.")
    var expiresAt: String?

    @Option(name: .long, help: "Item id (1…64 of A-Z a-z 0-9 . _ -); default: generated. An existing id resumes that item.")
    var id: String?

    @Option(name: .long, help: "Request header for every origin request of this item, 'Name: value' (repeatable).")
    var header: [String] = []

    @Option(name: .long, help: "Bandwidth cap for this process, bytes per second (e.g. 2MiB).")
    var rate: String?

    @Flag(name: .long, help: "Lock the item's objects: never evicted.")
    var lock = false

    @Flag(name: .long, help: "Print the renditions and the estimated size; download nothing.")
    var dryRun = false

    @Flag(name: .long, help: "Print JSON lines (events, then the item) instead of text.")
    var json = false

    @Flag(name: .long, help: "Record the item as queued and return; a running `hlscache serve` downloads it.")
    var detach = false

    @Option(
        name: .long,
        help:
            "Request every resource through this hlscache (a fleet's load balancer, http://HOST:PORT), so each lands on the node that serves it (docs/scale-out.md)."
    )
    var through: String?

    @Flag(
        name: .long,
        help: "Create the item without downloading: read its playlists, record its renditions and estimate; `hlscache resume ID` starts it."
    )
    var noStart = false

    @Flag(
        name: .long,
        help: "Store only the poster (--poster) now: the item is created ready, its stream not downloaded until `hlscache resume ID`."
    )
    var posterOnly = false

    @Flag(name: .long, help: "When the origin is unavailable (unreachable, 5xx, 429) after the retries, fail instead of waiting for it.")
    var failFast = false

    @Option(name: .long, help: "A title for the item (shown by ls, show and the API).")
    var title: String?

    @Option(name: .long, help: "A tag to find the item by (repeatable; `hlscache ls --tag`, GET /api/v1/items?tag=).")
    var tag: [String] = []

    @Option(name: .long, help: "A poster image URL, stored with the item and served through the proxy.")
    var poster: String?

    @Option(name: .long, help: "Your own JSON object kept with the item (at most 16 KiB), e.g. '{\"course\": 12}'.")
    var meta: String?

    @Option(name: .long, help: "The item's maximum size (e.g. 2GiB): larger, it fails tooLarge (default: downloads.maxItemSize).")
    var maxSize: String?

    @Option(name: .long, help: "Hours `serve` may download the item, HH:MM-HH:MM local time (default: downloads.window).")
    var window: String?

    @Option(
        name: .long,
        help:
            "What the item may fetch from origins per day (e.g. 500MiB), within downloads.dailyLimit; past it, it waits in idle until midnight."
    )
    var dailyLimit: String?

    @Flag(name: .long, help: "Record a live stream: follow its playlists and store every new segment (docs/fetch.md#live).")
    var record = false

    @Option(
        name: .long, help: "With --record: media seconds to record (90s, 45m, 2h); default: until --until, the stream's end, or pause/rm.")
    var duration: String?

    @Option(name: .long, help: "With --record: stop recording at this time (ISO 8601, e.g. 2026-11-28T21:00:00Z).")
    var until: String?

    @OptionGroup var origins: OriginOptions

    @OptionGroup var proxyBase: ProxyBaseOption

    func validate() throws {
        if let seconds, !(0...DownloadItem.maxPrecacheSeconds).contains(seconds) {
            throw ValidationError("--seconds \(seconds): expected 0…\(DownloadItem.maxPrecacheSeconds)")
        }
        if let id, !DownloadItem.isValidID(id) { throw ValidationError("--id \(id): expected 1…64 of A-Z a-z 0-9 . _ -, not . or ..") }
        if let expires, ItemFormatter.duration(expires) == nil { throw ValidationError("--expires \(expires): expected e.g. 45m, 12h, 7d") }
        if let expiresAt {
            guard expires == nil else { throw ValidationError("give --expires or --expires-at, not both") }
            guard let date = SetCommand.date(expiresAt) else {
                throw ValidationError("--expires-at \(expiresAt): expected an ISO 8601 date, e.g. 2026-12-01T00:00:00Z")
            }
            guard date > Date() else { throw ValidationError("--expires-at \(expiresAt): the date is in the past") }
        }
        if let rate, ByteSize(rate).map({ $0.bytes > 0 }) != true {
            throw ValidationError("--rate \(rate): expected a size per second, e.g. 2MiB")
        }
        for line in header where HeaderField(parsing: line) == nil { throw ValidationError("--header \(line): expected 'Name: value'") }
        if isMany {
            try validateMany()
        } else {
            guard !urls.isEmpty else { throw ValidationError("give the URL of a stream, several, or --from FILE") }
            do { _ = try OriginURL(url) } catch { throw ValidationError("cannot fetch \(url): \(error)") }
        }
        _ = try metadata()
        if !record && (duration != nil || until != nil) { throw ValidationError("--duration and --until go with --record") }
        if posterOnly {
            guard poster != nil else { throw ValidationError("--poster-only needs --poster URL") }
            if let other = [("--record", record), ("--dry-run", dryRun), ("--detach", detach), ("--no-start", noStart)].first(where: {
                $0.1
            }) {
                throw ValidationError("--poster-only stores the poster alone: not with \(other.0)")
            }
        }
        _ = try recordSpec()
        if let through {
            guard let server = try? OriginURL(through), server.path == "/", server.query == nil else {
                throw ValidationError("--through \(through): expected the balancer's base URL, http://HOST:PORT")
            }
        }
        do {
            _ = try RenditionSelection(variants: variants, audio: audio, subtitles: subtitles, iFrames: iframes)
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The item's expiry from `--expires` or `--expires-at`.
    var expiryDate: Date? {
        if let expiresAt { return SetCommand.date(expiresAt) }
        return expires.flatMap(ItemFormatter.duration).map { Date().addingTimeInterval($0) }
    }

    func run() async throws {
        if isMany { return try await runMany() }
        let printer = ProgressPrinter(json: json)
        let selection: RenditionSelection
        do {
            selection = try RenditionSelection(variants: variants, audio: audio, subtitles: subtitles, iFrames: iframes)
        } catch {
            throw ValidationError(error.message)
        }
        try await ItemContext.with(
            cache, origins: origins, rate: rate.flatMap(ByteSize.init)?.bytes, failFast: failFast,
            through: through.flatMap { try? OriginURL($0) },
            onEvent: { printer.handle($0) }
        ) { context in
            let proxy = proxyBase.base(context)
            let proxyURL = (try? OriginURL(url).proxyURL(base: proxy)) ?? url
            try context.items.recoverInterrupted()
            try context.downloader.expireDue()
            var item = DownloadItem(
                id: id ?? DownloadItem.generateID(), url: url, selection: selection,
                precacheSeconds: seconds ?? context.downloader.configuration.defaultSeconds,
                expiresAt: expiryDate, locked: lock,
                headers: header.compactMap(HeaderField.init(parsing:)))
            // Recorded with the item, so a resume (by `serve` too) goes through the balancer again.
            item.through = through.flatMap { try? OriginURL($0) }.map { "\($0.scheme)://\($0.authority)" }
            try metadata().apply(to: &item)
            item.record = try recordSpec()
            if dryRun {
                try await dryRunReport(item, context: context, proxyURL: proxyURL, printer: printer)
                return
            }
            if let existing = try context.items.item(item.id) {
                // The same id again: continue that item (after a kill, a pause, a failure) — the same stream only.
                guard existing.url == item.url else {
                    throw DownloadError.invalidState.with(
                        "item \(existing.id) already prewarms another stream (\(existing.url)); pick another --id, or `hlscache rm \(existing.id)` first"
                    )
                }
                let ignored = ignoredOptions(existing: existing, given: item)
                if !ignored.isEmpty {
                    let note =
                        "item \(existing.id) exists: it is resumed with its own options (--seconds \(existing.precacheSeconds)); ignored: "
                        + ignored.joined(separator: ", ") + "; `hlscache rm \(existing.id)` first to change them"
                    printer.emit(json ? ItemFormatter.json(["event": "note", "id": existing.id, "message": note]) : "note: " + note)
                }
                item = existing
                // A `deleted` item (`rm --keep-metadata` kept its record) is downloaded again, as `resume` does.
                if existing.state.isSettled && existing.state != .expired && !posterOnly {
                    try context.downloader.resume(existing.id)
                }
            } else {
                // Created without starting: `ready` until `resume` (the SDKs' load-metadata-then-start).
                if noStart || posterOnly { item.state = .ready }
                try context.items.insert(item)
            }
            if json {
                printer.emit(ItemFormatter.json(["event": "item", "id": item.id, "proxyURL": proxyURL]))
            } else {
                printer.emit("item \(item.id): play \(proxyURL)")
            }
            if item.record != nil {
                let recorded = proxy + DownloadItem.playbackPath(of: item.id, offline: false)
                printer.emit(
                    json
                        ? ItemFormatter.json(["event": "recording", "id": item.id, "playbackURL": recorded])
                        : "item \(item.id): recording; the recording plays at \(recorded) (on `hlscache serve`)")
            }
            if posterOnly {
                try await storePosterOnly(item.id, context: context, printer: printer, proxy: proxy)
                return
            }
            if noStart {
                let current = try context.items.require(item.id)
                let loaded = current.state == .ready ? try await context.downloader.prepare(item.id) : current
                if json {
                    var object = ItemFormatter.dictionary(loaded, proxyBase: proxy)
                    object["event"] = "done"
                    printer.emit(ItemFormatter.json(object))
                } else {
                    let estimate = loaded.bytesTotal > 0 ? ", estimated \(ItemFormatter.bytes(loaded.bytesTotal))" : ""
                    printer.emit(
                        "\(loaded.id): \(loaded.state.rawValue), \(loaded.renditions.count) renditions, \(loaded.segmentsTotal) segments\(estimate)"
                            + (loaded.state == .ready ? "; `hlscache resume \(loaded.id)` starts it" : ""))
                }
                return
            }
            if detach {
                if !json { printer.emit("queued; a running `hlscache serve` on this cache directory downloads it") }
                return
            }
            try await ForegroundDownload.run(item.id, context: context, printer: printer, proxyBase: proxy)
            if let note = OfflineKeyNote.note(for: item.id, context: context) {
                printer.emit(json ? ItemFormatter.json(["event": "note", "id": item.id, "message": note]) : "note: " + note)
            }
        }
    }

    /// The item options of this command line that an existing item keeps its own value of, as the note names them
    /// (`--rate` and the origin flags are this run's, not the item's: never ignored). `--seconds` and the selection
    /// are named when they differ from the item's (their defaults included: the item keeps its own); the flags
    /// `--lock` and `--iframes` when given and the item has not; `--expires` whenever given (it is relative to now);
    /// `--header` when the item's headers differ, by name only (a value may be a token).
    private func ignoredOptions(existing: DownloadItem, given: DownloadItem) -> [String] {
        var ignored: [String] = []
        if given.precacheSeconds != existing.precacheSeconds { ignored.append("--seconds \(given.precacheSeconds)") }
        let selection = existing.selection
        let wanted = given.selection
        if wanted.variants != selection.variants { ignored.append("--variants \(variants)") }
        if wanted.audio != selection.audio { ignored.append("--audio \(audio)") }
        if wanted.subtitles != selection.subtitles { ignored.append("--subtitles \(subtitles)") }
        if iframes && !selection.iFrames { ignored.append("--iframes") }
        if lock && !existing.locked { ignored.append("--lock (`hlscache lock \(existing.id)` locks it)") }
        if let expires { ignored.append("--expires \(expires)") }
        if let expiresAt { ignored.append("--expires-at \(expiresAt)") }
        // Names only: a header's value may be a token.
        if given.headers != existing.headers { ignored += given.headers.map { "--header '\($0.name): …'" } }
        // Metadata and policies of an existing item change with `hlscache set`.
        if title != nil { ignored.append("--title (`hlscache set \(existing.id) --title` changes it)") }
        if !tag.isEmpty { ignored.append("--tag (`hlscache set \(existing.id) --tag` changes them)") }
        if poster != nil { ignored.append("--poster") }
        if meta != nil { ignored.append("--meta") }
        if maxSize != nil { ignored.append("--max-size") }
        if window != nil { ignored.append("--window") }
        if dailyLimit != nil { ignored.append("--daily-limit") }
        return ignored
    }

    /// `--record` with `--duration` and `--until`, checked.
    private func recordSpec() throws -> RecordSpec? {
        guard record else { return nil }
        var spec = RecordSpec()
        if let duration {
            guard let seconds = ItemFormatter.duration(duration) else {
                throw ValidationError("--duration \(duration): expected e.g. 90s, 45m, 2h")
            }
            spec.duration = seconds
        }
        if let until {
            guard let date = ISO8601DateFormatter().date(from: until) else {
                throw ValidationError("--until \(until): expected an ISO 8601 time, e.g. 2026-11-28T21:00:00Z")
            }
            spec.until = date
        }
        return spec
    }

    /// `--title`, `--tag`, `--poster`, `--meta`, `--max-size`, `--window`, `--daily-limit`, checked.
    func metadata() throws -> ItemMetadataOptions {
        var options = ItemMetadataOptions()
        do throws(ItemMetadata.Problem) {
            options.title = try title.map(ItemMetadata.title)
            options.tags = try ItemMetadata.tags(tag)
            options.poster = try poster.map(ItemMetadata.poster)
            options.meta = try meta.map { text throws(ItemMetadata.Problem) in try ItemMetadata.meta(text: text) }
        } catch {
            throw ValidationError(error.message)
        }
        if let maxSize {
            guard let bytes = ByteSize(maxSize)?.bytes, bytes > 0 else {
                throw ValidationError("--max-size \(maxSize): expected a size, e.g. 2GiB")
            }
            options.maxBytes = bytes
        }
        if let window {
            guard let parsed = DownloadWindow(parsing: window) else {
                throw ValidationError("--window \(window): expected HH:MM-HH:MM, e.g. 22:00-06:00")
            }
            options.window = parsed
        }
        if let dailyLimit {
            guard let bytes = ByteSize(dailyLimit)?.bytes, bytes > 0 else {
                throw ValidationError("--daily-limit \(dailyLimit): expected a size, e.g. 500MiB")
            }
            options.dailyBytes = bytes
        }
        return options
    }

    private func dryRunReport(_ item: DownloadItem, context: ItemContext, proxyURL: String, printer: ProgressPrinter) async throws {
        let (plan, fits) = try await context.downloader.dryRun(item)
        if json {
            var object: [String: Any] = [
                "event": "plan", "url": item.url, "proxyURL": proxyURL, "seconds": item.precacheSeconds, "partial": plan.isPartial,
                "resources": plan.resources.count, "segments": plan.segmentCount,
                "renditions": plan.renditions.map { rendition -> [String: Any] in
                    var r: [String: Any] = [
                        "url": rendition.selected.url, "role": rendition.selected.role.rawValue, "segments": rendition.segmentCount,
                        "duration": rendition.duration,
                    ]
                    if let b = rendition.selected.bandwidth { r["bandwidth"] = b }
                    if let e = rendition.estimatedBytes { r["estimatedBytes"] = e }
                    if let n = rendition.selected.name { r["name"] = n }
                    if let l = rendition.selected.language { r["language"] = l }
                    return r
                },
            ]
            if let estimate = plan.estimatedBytes { object["estimatedBytes"] = estimate }
            if !plan.notes.isEmpty { object["notes"] = plan.notes }
            if let fits { object["error"] = fits.code }
            printer.emit(ItemFormatter.json(object))
        } else {
            for rendition in plan.renditions {
                let s = rendition.selected
                let label = [s.role.rawValue, s.name, s.language, s.bandwidth.map { "\($0) bit/s" }].compactMap { $0 }.joined(
                    separator: " ")
                let estimate = rendition.estimatedBytes.map(ItemFormatter.bytes) ?? "size unknown"
                printer.emit(
                    "\(label): \(rendition.segmentCount) segments, \(String(format: "%.1f", rendition.duration)) s, \(estimate)  \(s.url)")
            }
            let total = plan.estimatedBytes.map { "\(ItemFormatter.bytes($0)) (\($0) bytes)" } ?? "unknown"
            printer.emit("total: \(plan.resources.count) resources, \(plan.segmentCount) segments, estimated \(total)")
            printer.emit("play: \(proxyURL)")
            for note in plan.notes { printer.emit("note: " + note) }
        }
        if let fits { throw fits }
    }
}

/// The metadata and policy options of `fetch`, checked.
struct ItemMetadataOptions {
    var title: String?
    var tags: [String] = []
    var poster: String?
    var meta: String?
    var maxBytes: Int64?
    var window: DownloadWindow?
    var dailyBytes: Int64?

    func apply(to item: inout DownloadItem) {
        item.title = title
        item.tags = tags
        item.posterURL = poster
        item.metadata = meta
        item.maxBytes = maxBytes
        item.downloadWindow = window
        item.dailyBytes = dailyBytes
    }
}
