/// The timeline view of a media playlist: what a player (or the downloader) needs to know about each segment.
public struct MediaPlaylist: Sendable {
    public enum PlaylistType: String, Sendable { case vod = "VOD", event = "EVENT" }

    public var version: Int?
    public var targetDuration: Int?
    public var mediaSequence: UInt64 = 0
    public var discontinuitySequence: UInt64 = 0
    public var playlistType: PlaylistType?
    public var hasEndList = false
    public var isIFramesOnly = false
    public var independentSegments = false
    public var partTargetDuration: Double?
    public var serverControl: ServerControl?
    /// `SKIPPED-SEGMENTS` of an `EXT-X-SKIP` (a delta update); the first listed segment has this offset.
    public var skippedSegments: UInt64 = 0
    public var start: StartPoint?
    public var segments: [Segment] = []
    /// LL-HLS partial segments, each tagged with the media sequence number of the segment it belongs to.
    public var parts: [Part] = []
    public var preloadHints: [PreloadHint] = []
    public var renditionReports: [RenditionReport] = []
    public var dateRanges: [DateRange] = []

    /// Sum of all segment durations.
    public var totalDuration: Double { segments.last.map { $0.startTime + $0.duration } ?? 0 }
    /// A playlist that may still change (no `EXT-X-ENDLIST`).
    public var isLive: Bool { !hasEndList }

    /// The segments whose start time is before `seconds` (all of them when `seconds` is 0): "the first N seconds".
    public func segments(startingBefore seconds: Double) -> ArraySlice<Segment> {
        guard seconds > 0 else { return segments[...] }
        let end = segments.firstIndex { $0.startTime >= seconds } ?? segments.count
        return segments[..<end]
    }
}

public struct Segment: Sendable, Hashable {
    /// 0-based position in the playlist.
    public var index: Int
    /// The reference as written (variables substituted).
    public var uri: String
    /// The absolute URL (equal to ``uri`` when the view was built without a base URL).
    public var url: String
    public var duration: Double
    public var title: String
    /// Seconds from the start of the first listed segment.
    public var startTime: Double
    public var mediaSequence: UInt64
    public var discontinuitySequence: UInt64
    /// Whether an `EXT-X-DISCONTINUITY` precedes this segment.
    public var isDiscontinuity: Bool
    public var isGap: Bool
    public var byteRange: ByteRange?
    /// The key in force for the identity key format (the one AES-128 uses), if any and not `NONE`.
    public var key: Key?
    /// Every key in force, one per KEYFORMAT (several DRM systems can apply at once).
    public var keys: [Key]
    public var map: MapSection?
    public var programDateTime: String?
    public var bitrate: UInt64?
    /// 1-based line of the URI.
    public var line: Int

    /// The AES-128 IV: the explicit one from the key, left-padded to 16 bytes, or the media sequence number as a
    /// 128-bit big-endian integer (RFC 8216 §5.2). Nil when no AES-128 key applies.
    public var aes128IV: [UInt8]? {
        guard let key, key.method == .aes128 else { return nil }
        if let iv = key.iv { return [UInt8](repeating: 0, count: 16 - iv.count) + iv }
        var iv = [UInt8](repeating: 0, count: 8)
        for shift in stride(from: 56, through: 0, by: -8) { iv.append(UInt8(truncatingIfNeeded: mediaSequence >> UInt64(shift))) }
        return iv
    }
}

/// A resolved byte range: `length` bytes starting at `offset`.
public struct ByteRange: Sendable, Hashable {
    public var length: UInt64
    public var offset: UInt64
    public init(length: UInt64, offset: UInt64) {
        self.length = length
        self.offset = offset
    }
    /// The value of an HTTP `Range` header for it, or nil for an empty range.
    public var httpRange: String? { length == 0 ? nil : "bytes=\(offset)-\(offset + length - 1)" }
}

public struct Key: Sendable, Hashable {
    public enum Method: Sendable, Hashable {
        case none, aes128, sampleAES, sampleAESCTR
        case other(String)
        init(_ text: String) {
            switch text {
            case "NONE": self = .none
            case "AES-128": self = .aes128
            case "SAMPLE-AES": self = .sampleAES
            case "SAMPLE-AES-CTR": self = .sampleAESCTR
            default: self = .other(text)
            }
        }

        /// The method as a playlist writes it.
        public var name: String {
            switch self {
            case .none: "NONE"
            case .aes128: "AES-128"
            case .sampleAES: "SAMPLE-AES"
            case .sampleAESCTR: "SAMPLE-AES-CTR"
            case .other(let text): text
            }
        }
    }
    public var method: Method
    public var uri: String?
    public var url: String?
    /// The explicit IV, if the tag has one.
    public var iv: [UInt8]?
    public var keyFormat: String
    public var keyFormatVersions: String?

    /// A key a proxy can fetch and keep: any method but `NONE`, the identity key format, an `http(s)` URL. Its
    /// length says the cipher: 16 bytes for AES-128, SAMPLE-AES, SAMPLE-AES-CTR; 32 for AES-256, AES-256-CTR.
    public var isFetchable: Bool {
        guard method != .none, keyFormat == "identity", let url else { return false }
        return Playlist.isHTTP(url)
    }
}

public struct MapSection: Sendable, Hashable {
    public var uri: String
    public var url: String
    public var byteRange: ByteRange?
}

public struct Part: Sendable, Hashable {
    public var uri: String
    public var url: String
    public var duration: Double
    public var isIndependent: Bool
    public var isGap: Bool
    public var byteRange: ByteRange?
    /// Media sequence number of the parent segment.
    public var mediaSequence: UInt64
    /// Position within the parent segment.
    public var partIndex: Int
}

public struct PreloadHint: Sendable, Hashable {
    public var type: String
    public var uri: String
    public var url: String
    public var byteRangeStart: UInt64?
    public var byteRangeLength: UInt64?
}

public struct RenditionReport: Sendable, Hashable {
    public var uri: String
    public var url: String
    public var lastMediaSequence: UInt64?
    public var lastPart: UInt64?
}

public struct DateRange: Sendable, Hashable {
    public var id: String
    public var `class`: String?
    public var startDate: String?
    public var duration: Double?
    /// `X-ASSET-URI` of an interstitial, resolved.
    public var assetURL: String?
    /// `X-ASSET-LIST` of an interstitial, resolved.
    public var assetListURL: String?
    public var attributes: AttributeList
}

public struct ServerControl: Sendable, Hashable {
    public var canBlockReload: Bool
    public var canSkipUntil: Double?
    public var canSkipDateRanges: Bool
    public var holdBack: Double?
    public var partHoldBack: Double?
}

public struct StartPoint: Sendable, Hashable {
    public var timeOffset: Double
    public var precise: Bool
}

extension Playlist {
    /// The timeline of a media playlist.
    /// - Parameters:
    ///   - baseURL: the playlist's URL; when given, every `url` is absolute.
    ///   - imports: variables of the multivariant playlist for `EXT-X-DEFINE:IMPORT=`.
    public func media(baseURL: String? = nil, imports: [String: String] = [:]) throws -> MediaPlaylist {
        let context = try ResolutionContext(playlist: self, baseURL: baseURL, imports: imports)
        var playlist = MediaPlaylist()
        var duration = 0.0, title = ""
        var pendingRange: (length: UInt64, offset: UInt64?)?
        var discontinuity = false, gap = false
        var programDateTime: String?
        var bitrate: UInt64?
        var keys: [String: Key] = [:]
        var keyOrder: [String] = []
        var map: MapSection?
        var startTime = 0.0
        var discontinuitySequence: UInt64 = 0
        var lastRange: (uri: String, end: UInt64)?
        var lastPartRange: (uri: String, end: UInt64)?
        var partIndex = 0
        var sawSequence = false

        for (index, line) in lines.enumerated() {
            let lineNumber = index + 1
            // Tolerant: a line whose value cannot be read is skipped, as a player skips it.
            do {
                switch line.kind {
                case .blank, .comment: continue
                case .uri:
                    let (uri, url) = try context.reference(text(ofLine: index).trimmingLineSpace(), line: lineNumber)
                    var byteRange: ByteRange?
                    if let range = pendingRange {
                        let offset: UInt64
                        if let explicit = range.offset {
                            offset = explicit
                        } else if let last = lastRange, last.uri == uri {
                            offset = last.end
                        } else {
                            throw PlaylistError.invalidByteRange.at(line: lineNumber, "byte range without offset")
                        }
                        byteRange = ByteRange(length: range.length, offset: offset)
                        lastRange = (uri, offset + range.length)
                    } else {
                        lastRange = nil
                    }
                    if !sawSequence {
                        discontinuitySequence = playlist.discontinuitySequence
                        sawSequence = true
                    }
                    if discontinuity {
                        guard discontinuitySequence < UInt64.max else {
                            throw PlaylistError.absurdValue.at(line: lineNumber, "discontinuity sequence number overflows")
                        }
                        discontinuitySequence += 1
                    }
                    let inForce = keyOrder.compactMap { keys[$0] }
                    let sequence = try playlist.nextMediaSequence(line: lineNumber)
                    playlist.segments.append(
                        Segment(
                            index: playlist.segments.count, uri: uri, url: url, duration: duration, title: title, startTime: startTime,
                            mediaSequence: sequence,
                            discontinuitySequence: discontinuitySequence, isDiscontinuity: discontinuity, isGap: gap, byteRange: byteRange,
                            key: keys["identity"] ?? (inForce.count == 1 ? inForce[0] : nil), keys: inForce, map: map,
                            programDateTime: programDateTime, bitrate: bitrate, line: lineNumber))
                    startTime += duration
                    pendingRange = nil
                    discontinuity = false
                    gap = false
                    programDateTime = nil
                    partIndex = 0
                case .tag(let tag):
                    switch tag {
                    case .inf where isTolerant:
                        // `-1` (IPTV), `10.000 tvg-id="BBC"`: the leading number, as players read it; negative is unknown (0).
                        let value = tagValue(ofLine: index)
                        let comma = value.firstIndex(of: ",")
                        var head = String(value[..<(comma ?? value.endIndex)]).trimmingLineSpace()
                        duration = head.withUTF8 { Numbers.leadingDecimal($0, 0, $0.count)?.value } ?? 0
                        if !(duration >= 0 && duration <= Numbers.maxSegmentDuration) { duration = 0 }
                        title = comma.map { String(value[value.index(after: $0)...]) } ?? ""
                    case .inf:
                        let value = tagValue(ofLine: index)
                        let comma = value.firstIndex(of: ",")
                        duration = try Numbers.decimal(
                            String(value[..<(comma ?? value.endIndex)]).trimmingLineSpace(), line: lineNumber, what: "EXTINF duration",
                            range: 0...Numbers.maxSegmentDuration)
                        title = comma.map { String(value[value.index(after: $0)...]) } ?? ""
                    case .version:
                        playlist.version = Int(
                            try Numbers.integer(tagValue(ofLine: index).trimmingLineSpace(), line: lineNumber, what: "version"))
                    case .targetDuration where isTolerant:
                        // 2.5 → 2, as hls.js (parseInt) and VLC (%d) read it.
                        if let value = Numbers.tolerantInteger(tagValue(ofLine: index).trimmingLineSpace())?.value,
                            value <= UInt64(Numbers.maxSegmentDuration)
                        {
                            playlist.targetDuration = Int(value)
                        }
                    case .mediaSequence where isTolerant:
                        // A negative media sequence is read as 0 (the numbers of the segments then start at 0).
                        if let value = Numbers.tolerantInteger(tagValue(ofLine: index).trimmingLineSpace())?.value {
                            playlist.mediaSequence = value
                        }
                    case .discontinuitySequence where isTolerant:
                        if let value = Numbers.tolerantInteger(tagValue(ofLine: index).trimmingLineSpace())?.value {
                            playlist.discontinuitySequence = value
                        }
                    case .map where isTolerant && (try? attributes(ofLine: index)).flatMap({ $0["URI"] }) == nil:
                        // EXT-X-MAP without URI: ignored, as players ignore it.
                        break
                    case .targetDuration:
                        playlist.targetDuration = Int(
                            try Numbers.integer(tagValue(ofLine: index).trimmingLineSpace(), line: lineNumber, what: "target duration"))
                    case .mediaSequence:
                        playlist.mediaSequence = try Numbers.integer(
                            tagValue(ofLine: index).trimmingLineSpace(), line: lineNumber, what: "media sequence")
                    case .discontinuitySequence:
                        playlist.discontinuitySequence = try Numbers.integer(
                            tagValue(ofLine: index).trimmingLineSpace(), line: lineNumber, what: "discontinuity sequence")
                    case .playlistType:
                        playlist.playlistType = MediaPlaylist.PlaylistType(rawValue: tagValue(ofLine: index).trimmingLineSpace())
                    case .endList: playlist.hasEndList = true
                    case .iFramesOnly: playlist.isIFramesOnly = true
                    case .independentSegments: playlist.independentSegments = true
                    case .byteRange: pendingRange = try Numbers.byteRange(tagValue(ofLine: index).trimmingLineSpace(), line: lineNumber)
                    case .discontinuity: discontinuity = true
                    case .gap: gap = true
                    case .programDateTime: programDateTime = tagValue(ofLine: index).trimmingLineSpace()
                    case .bitrate:
                        bitrate = try Numbers.integer(tagValue(ofLine: index).trimmingLineSpace(), line: lineNumber, what: "bitrate")
                    case .key:
                        let key = try makeKey(try attributes(ofLine: index), context: context, line: lineNumber)
                        if key.method == .none {
                            keys.removeAll()
                            keyOrder.removeAll()
                        } else {
                            if keys[key.keyFormat] == nil { keyOrder.append(key.keyFormat) }
                            keys[key.keyFormat] = key
                        }
                    case .map:
                        let attributes = try attributes(ofLine: index)
                        let (uri, url) = try context.reference(attributes["URI"] ?? "", line: lineNumber)
                        var range: ByteRange?
                        if let text = attributes["BYTERANGE"] {
                            let parsed = try Numbers.byteRange(text, line: lineNumber)
                            range = ByteRange(length: parsed.length, offset: parsed.offset ?? 0)
                        }
                        map = MapSection(uri: uri, url: url, byteRange: range)
                    case .part:
                        let attributes = try attributes(ofLine: index)
                        let (uri, url) = try context.reference(attributes["URI"] ?? "", line: lineNumber)
                        var range: ByteRange?
                        if let text = attributes["BYTERANGE"] {
                            let parsed = try Numbers.byteRange(text, line: lineNumber)
                            let offset: UInt64
                            if let explicit = parsed.offset {
                                offset = explicit
                            } else if let last = lastPartRange, last.uri == uri {
                                offset = last.end
                            } else {
                                throw PlaylistError.invalidByteRange.at(line: lineNumber, "part byte range without offset")
                            }
                            range = ByteRange(length: parsed.length, offset: offset)
                            lastPartRange = (uri, offset + parsed.length)
                        }
                        let sequence = try playlist.nextMediaSequence(line: lineNumber)
                        playlist.parts.append(
                            Part(
                                uri: uri, url: url,
                                duration: try attributes.decimal("DURATION", line: lineNumber, range: 0...Numbers.maxSegmentDuration) ?? 0,
                                isIndependent: attributes.flag("INDEPENDENT"), isGap: attributes.flag("GAP"), byteRange: range,
                                mediaSequence: sequence, partIndex: partIndex))
                        partIndex += 1
                    case .partInf:
                        playlist.partTargetDuration = try attributes(ofLine: index).decimal(
                            "PART-TARGET", line: lineNumber, range: 0...Numbers.maxSegmentDuration)
                    case .serverControl:
                        let a = try attributes(ofLine: index)
                        playlist.serverControl = ServerControl(
                            canBlockReload: a.flag("CAN-BLOCK-RELOAD"),
                            canSkipUntil: try a.decimal("CAN-SKIP-UNTIL", line: lineNumber, range: 0...1e9),
                            canSkipDateRanges: a.flag("CAN-SKIP-DATERANGES"),
                            holdBack: try a.decimal("HOLD-BACK", line: lineNumber, range: 0...1e9),
                            partHoldBack: try a.decimal("PART-HOLD-BACK", line: lineNumber, range: 0...1e9))
                    case .skip:
                        playlist.skippedSegments =
                            try attributes(ofLine: index).integer("SKIPPED-SEGMENTS", line: lineNumber, max: 1 << 40) ?? 0
                    case .preloadHint:
                        let a = try attributes(ofLine: index)
                        let (uri, url) = try context.reference(a["URI"] ?? "", line: lineNumber)
                        playlist.preloadHints.append(
                            PreloadHint(
                                type: a["TYPE"] ?? "", uri: uri, url: url,
                                byteRangeStart: try a.integer("BYTERANGE-START", line: lineNumber, max: Numbers.maxByteOffset),
                                byteRangeLength: try a.integer("BYTERANGE-LENGTH", line: lineNumber, max: Numbers.maxByteOffset)))
                    case .renditionReport:
                        let a = try attributes(ofLine: index)
                        let (uri, url) = try context.reference(a["URI"] ?? "", line: lineNumber)
                        playlist.renditionReports.append(
                            RenditionReport(
                                uri: uri, url: url, lastMediaSequence: try a.integer("LAST-MSN", line: lineNumber),
                                lastPart: try a.integer("LAST-PART", line: lineNumber)))
                    case .dateRange:
                        let a = try attributes(ofLine: index)
                        playlist.dateRanges.append(
                            DateRange(
                                id: a["ID"] ?? "", class: a["CLASS"], startDate: a["START-DATE"],
                                duration: try a.decimal("DURATION", line: lineNumber, range: 0...1e9),
                                assetURL: try a["X-ASSET-URI"].map { try context.reference($0, line: lineNumber).url },
                                assetListURL: try a["X-ASSET-LIST"].map { try context.reference($0, line: lineNumber).url },
                                attributes: a))
                    case .start:
                        playlist.start = try makeStart(try attributes(ofLine: index), line: lineNumber)
                    default: break
                    }
                }
            } catch is PlaylistError where isTolerant {
                continue
            }
        }
        return playlist
    }

    func makeKey(_ attributes: AttributeList, context: ResolutionContext, line: Int) throws -> Key {
        let reference = try attributes["URI"].map { try context.reference($0, line: line) }
        return Key(
            method: Key.Method(attributes["METHOD"] ?? "NONE"), uri: reference?.uri, url: reference?.url,
            iv: try attributes["IV"].flatMap { Numbers.hexBytes(try context.substitute($0, line: line)) },
            keyFormat: attributes["KEYFORMAT"] ?? "identity",
            keyFormatVersions: attributes["KEYFORMATVERSIONS"])
    }

    func makeStart(_ attributes: AttributeList, line: Int) throws -> StartPoint {
        StartPoint(
            timeOffset: try attributes.decimal("TIME-OFFSET", line: line, range: -1e9...1e9) ?? 0,
            precise: attributes.flag("PRECISE"))
    }
}

extension MediaPlaylist {
    /// The media sequence number of the next segment (or of the parts before it). Each number is valid on its own,
    /// but a media sequence near 2^64 plus skipped and listed segments can run past it: a corrupt playlist.
    fileprivate func nextMediaSequence(line: Int) throws -> UInt64 {
        let (withSkipped, overflow1) = mediaSequence.addingReportingOverflow(skippedSegments)
        let (sequence, overflow2) = withSkipped.addingReportingOverflow(UInt64(segments.count))
        if overflow1 || overflow2 { throw PlaylistError.absurdValue.at(line: line, "media sequence number overflows") }
        return sequence
    }
}

extension String {
    func trimmingLineSpace() -> String {
        let u = utf8
        guard let first = u.firstIndex(where: { !isLineSpace($0) }), let last = u.lastIndex(where: { !isLineSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
