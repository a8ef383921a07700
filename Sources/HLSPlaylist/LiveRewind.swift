/// Time-shift of a live media playlist (docs/fetch.md#live, `live.rewindWindow`): the segments a live playlist listed,
/// remembered from each reading as written, so that a later reading can be served extended backwards past the
/// origin's window by those it no longer lists. Pure: the caller says when (``observe(_:media:now:)``, seconds on any
/// clock) and which segments it still holds (``extending(_:media:isHeld:)``).
///
/// The extension keeps the origin's media sequence numbers (an AES-128 key without an IV uses them) and discontinuity
/// numbers: it lists only the run of remembered segments that ends right before the window, each consecutive, and
/// stops at the first one missing (never listed while watched, forgotten, or no longer held) — no hole in the middle.
public struct LiveRewind: Sendable {
    /// One segment as a reading listed it.
    public struct Entry: Sendable, Hashable {
        public var sequence: UInt64
        public var discontinuitySequence: UInt64
        public var duration: Double
        /// Its lines as written, the URI last: `EXTINF`, `EXT-X-BYTERANGE`, `EXT-X-PROGRAM-DATE-TIME`, `EXT-X-GAP`,
        /// `EXT-X-BITRATE` (parts, date ranges and discontinuities are not kept; the discontinuity number is).
        public var lines: [String]
        /// The `EXT-X-KEY` lines in force for it (none: clear), one per key format.
        public var keyLines: [String]
        /// The `EXT-X-MAP` line in force for it.
        public var mapLine: String?
        /// The URI resolved against the playlist's URL (what the caller looks up).
        public var url: String
        /// When a reading last listed it.
        public var lastListed: Double
    }

    /// Remembered segments, in ascending media sequence.
    public private(set) var entries: [Entry] = []
    /// Seconds a segment is remembered after a reading last listed it.
    public let keep: Double
    /// At most this many segments are remembered (the oldest go first).
    public let maxEntries: Int

    public init(keep: Double, maxEntries: Int) {
        self.keep = keep
        self.maxEntries = max(1, maxEntries)
    }

    /// Remembers what a reading of the live playlist lists, at `now`, and forgets what no reading listed for longer
    /// than ``keep``. A window whose last segment comes before the last remembered one (the encoder started again
    /// from a lower media sequence) starts the memory over. A delta update (`EXT-X-SKIP`) is not read.
    public mutating func observe(_ playlist: Playlist, media: MediaPlaylist, now: Double) {
        guard media.skippedSegments == 0, let first = media.segments.first, let last = media.segments.last else {
            prune(now: now)
            return
        }
        if let known = entries.last, last.mediaSequence < known.sequence { entries.removeAll() }
        let listed = Self.entries(of: playlist, media: media, now: now)
        entries.removeAll { $0.sequence >= first.mediaSequence }
        entries.append(contentsOf: listed.entries)
        prune(now: now)
    }

    private mutating func prune(now: Double) {
        entries.removeAll { $0.lastListed < now - keep }
        if entries.count > maxEntries { entries.removeFirst(entries.count - maxEntries) }
    }

    /// The remembered segments that come right before `media`'s window, consecutive and each `isHeld`, oldest first.
    public func held(before media: MediaPlaylist, isHeld: (Entry) -> Bool) -> [Entry] {
        guard media.skippedSegments == 0, let first = media.segments.first else { return [] }
        var run: [Entry] = []
        var expected = first.mediaSequence
        for entry in entries.reversed() where entry.sequence < first.mediaSequence {
            guard expected > 0, entry.sequence == expected - 1, isHeld(entry) else { break }
            run.append(entry)
            expected = entry.sequence
        }
        return run.reversed()
    }

    /// `playlist` (a reading of the live playlist, `media` its view) extended backwards by ``held(before:isHeld:)``:
    /// its header with `EXT-X-MEDIA-SEQUENCE` and `EXT-X-DISCONTINUITY-SEQUENCE` of the first segment held, the held
    /// segments with their keys, init sections and discontinuities, then the window as the origin wrote it. Nil when
    /// nothing is held before the window (the reading as it is, then) or the playlist has ended.
    public func extending(_ playlist: Playlist, media: MediaPlaylist, isHeld: (Entry) -> Bool) -> [UInt8]? {
        guard !media.hasEndList, let first = media.segments.first else { return nil }
        let run = held(before: media, isHeld: isHeld)
        guard let oldest = run.first else { return nil }
        let window = Self.entries(of: playlist, media: media, now: 0)
        let lines = playlist.lines
        // Where the first segment's own lines start: its tags right before its URI.
        var insert = first.line - 1
        while insert > 0, Self.isSegmentLine(lines[insert - 1].kind) { insert -= 1 }
        var out: [UInt8] = []
        out.reserveCapacity(playlist.bytes.count + run.count * 96)
        func add(_ text: String) {
            out.append(contentsOf: text.utf8)
            out.append(UInt8(ascii: "\n"))
        }
        let hasDiscontinuitySequence = lines[..<insert].contains { $0.kind == .tag(.discontinuitySequence) }
        for index in 0..<insert {
            switch lines[index].kind {
            case .tag(.mediaSequence):
                add("#EXT-X-MEDIA-SEQUENCE:\(oldest.sequence)")
                if !hasDiscontinuitySequence && oldest.discontinuitySequence != 0 {
                    add("#EXT-X-DISCONTINUITY-SEQUENCE:\(oldest.discontinuitySequence)")
                }
            case .tag(.discontinuitySequence):
                add("#EXT-X-DISCONTINUITY-SEQUENCE:\(oldest.discontinuitySequence)")
            default:
                add(Self.raw(playlist, line: index))
            }
        }
        var keys: [String] = []
        var map: String?
        var discontinuity = oldest.discontinuitySequence
        func state(of entry: Entry, written preamble: Set<Tag> = []) {
            if entry.discontinuitySequence != discontinuity, !preamble.contains(.discontinuity) { add("#EXT-X-DISCONTINUITY") }
            discontinuity = entry.discontinuitySequence
            if entry.keyLines != keys, !preamble.contains(.key) {
                if entry.keyLines.isEmpty { add("#EXT-X-KEY:METHOD=NONE") } else { entry.keyLines.forEach(add) }
            }
            keys = entry.keyLines
            if let line = entry.mapLine, line != map, !preamble.contains(.map) { add(line) }
            map = entry.mapLine
        }
        for entry in run {
            state(of: entry)
            entry.lines.forEach(add)
        }
        // The window's first segment: what its own lines do not say again (a discontinuity, a key, an init section).
        if let current = window.entries.first {
            let preamble = Set(
                lines[insert..<(first.line - 1)].compactMap { line -> Tag? in
                    if case .tag(let tag) = line.kind { return tag }
                    return nil
                })
            state(of: current, written: preamble)
        }
        for index in insert..<lines.count { add(Self.raw(playlist, line: index)) }
        return out
    }

    /// Tags that belong to the segment after them (and comments and blank lines among them).
    private static func isSegmentLine(_ kind: LineKind) -> Bool {
        switch kind {
        case .blank, .comment: return true
        case .tag(let tag):
            return [.inf, .byteRange, .discontinuity, .key, .map, .programDateTime, .gap, .bitrate, .part, .dateRange].contains(tag)
        case .uri: return false
        }
    }

    private static func raw(_ playlist: Playlist, line index: Int) -> String {
        String(decoding: playlist.bytes[playlist.lines[index].range], as: UTF8.self)
    }

    /// Each listed segment with the lines and state in force for it.
    private static func entries(of playlist: Playlist, media: MediaPlaylist, now: Double) -> (entries: [Entry], keys: [String]) {
        var result: [Entry] = []
        var keys: [(format: String, line: String)] = []
        var map: String?
        var pending: [String] = []
        var next = 0
        for (index, line) in playlist.lines.enumerated() {
            switch line.kind {
            case .tag(.key):
                let text = raw(playlist, line: index)
                let attributes = try? playlist.attributes(ofLine: index)
                if attributes?["METHOD"] == "NONE" {
                    keys.removeAll()
                } else {
                    let format = attributes?["KEYFORMAT"] ?? "identity"
                    keys.removeAll { $0.format == format }
                    keys.append((format, text))
                }
            case .tag(.map):
                map = raw(playlist, line: index)
            case .tag(.inf), .tag(.byteRange), .tag(.programDateTime), .tag(.gap), .tag(.bitrate):
                pending.append(raw(playlist, line: index))
            case .uri(.segment):
                guard next < media.segments.count, media.segments[next].line == index + 1 else { return (result, keys.map(\.line)) }
                let segment = media.segments[next]
                next += 1
                result.append(
                    Entry(
                        sequence: segment.mediaSequence, discontinuitySequence: segment.discontinuitySequence, duration: segment.duration,
                        lines: pending + [raw(playlist, line: index)], keyLines: keys.map(\.line), mapLine: map, url: segment.url,
                        lastListed: now))
                pending = []
            default:
                break
            }
        }
        return (result, keys.map(\.line))
    }
}
