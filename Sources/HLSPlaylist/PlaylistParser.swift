#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The single pass that indexes a playlist: splits lines, classifies tags, finds every URI value and checks
/// the structure (one kind of playlist, every EXTINF followed by a URI, sane numbers, defined variables).
///
/// `tolerant`: the reader of the serve path. Only a body that is no playlist at all (no `#EXTM3U` after an
/// optional BOM and whitespace) throws; every other departure from the RFC is a ``PlaylistWarning`` and is read
/// the way players read it, and every URI that can be found is still a slot.
struct PlaylistParser {
    let tolerant: Bool
    private(set) var lines: [Line] = []
    private(set) var warnings: [PlaylistWarning] = []
    private(set) var isChannelList = false
    private(set) var slots: [URISlot] = []
    private(set) var definitions: [VariableDefinition] = []
    private(set) var kind: PlaylistKind = .media

    private var masterTagLine = 0
    private var mediaTagLine = 0
    /// Line number of an EXTINF / EXT-X-STREAM-INF still waiting for its URI line.
    private var pendingSegmentLine = 0
    private var pendingVariantLine = 0
    /// An EXT-X-BYTERANGE without offset waiting for its URI line.
    private var pendingImplicitByteRange = false
    private var pendingByteRange = false
    /// The URI bytes of the previous segment, when it was a byte range (for implicit offsets).
    private var previousRangedSegmentURI: Range<Int>?
    /// Lines of EXTINF / EXT-X-TARGETDURATION (hls.js calls a playlist with either a media playlist).
    private var sawMediaTimeline = false

    init(tolerant: Bool = false) {
        self.tolerant = tolerant
    }

    /// Throws `error` (strict), or records it as a warning of `kind` (tolerant) and returns.
    private mutating func fail(_ error: PlaylistError, _ kind: PlaylistWarning.Kind? = nil) throws {
        guard tolerant else { throw error }
        warn(kind ?? PlaylistWarning.Kind(error), line: error.line, error.detail)
    }

    private mutating func warn(_ kind: PlaylistWarning.Kind, line: Int, _ detail: @autoclosure () -> String) {
        if let index = warnings.firstIndex(where: { $0.kind == kind }) {
            warnings[index].count += 1
        } else {
            warnings.append(PlaylistWarning(kind: kind, line: line, detail: detail(), count: 1))
        }
    }

    mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws {
        var start = 0
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { start = 3 }
        if tolerant {
            // Blank lines and spaces before #EXTM3U: kept as the BOM is, before the first line.
            var first = start
            while first < bytes.count, isLineSpace(bytes[first]) || bytes[first] == UInt8(ascii: "\n") { first += 1 }
            if first > start, hasPrefix(bytes, first, bytes.count, "#EXTM3U") {
                warn(.leadingWhitespace, line: 1, "\(first - start) bytes of whitespace before #EXTM3U")
                start = first
            }
        }
        if !hasPrefix(bytes, start, bytes.count, "#EXTM3U")
            || (start + 7 < bytes.count && !isLineSpace(bytes[start + 7]) && bytes[start + 7] != UInt8(ascii: "\n"))
        {
            throw PlaylistError.notHLS.at(line: 1, "the first line is not #EXTM3U")
        }
        lines.reserveCapacity(bytes.count / 24)
        slots.reserveCapacity(bytes.count / 48)
        var lineNumber = 0
        while start < bytes.count {
            lineNumber += 1
            let newline: Int
            if let found = memchr(bytes.baseAddress! + start, Int32(UInt8(ascii: "\n")), bytes.count - start) {
                newline = bytes.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
            } else {
                newline = bytes.count
            }
            var end = newline
            let terminator: LineTerminator
            if newline == bytes.count {
                terminator = .none
            } else if end > start, bytes[end - 1] == UInt8(ascii: "\r") {
                end -= 1
                terminator = .crlf
            } else {
                terminator = .lf
            }
            let kind = try classify(bytes, start, end, lineNumber)
            lines.append(Line(range: start..<end, terminator: terminator, kind: kind))
            start = newline + 1
        }
        if pendingSegmentLine > 0 {
            try fail(PlaylistError.missingURI.at(line: pendingSegmentLine, "#EXTINF is not followed by a segment URI (ignored)"))
        }
        if pendingVariantLine > 0 {
            try fail(PlaylistError.missingURI.at(line: pendingVariantLine, "#EXT-X-STREAM-INF is not followed by a URI (ignored)"))
        }
        if tolerant && masterTagLine > 0 && mediaTagLine > 0 {
            // Both kinds: hls.js calls it a media playlist when it has EXTINF or EXT-X-TARGETDURATION.
            kind = sawMediaTimeline ? .media : .master
        } else {
            kind = masterTagLine > 0 ? .master : .media
        }
    }

    private mutating func classify(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ lineNumber: Int) throws
        -> LineKind
    {
        var first = start
        while first < end, isLineSpace(bytes[first]) { first += 1 }
        if first == end { return .blank }
        if bytes[first] != UInt8(ascii: "#") {
            var last = end
            while last > first, isLineSpace(bytes[last - 1]) { last -= 1 }
            return .uri(try uriLine(bytes, first, last, lineNumber))
        }
        // Most tag lines of a media playlist are EXTINF: skip the table lookup for them.
        if hasPrefix(bytes, first, end, "#EXTINF:") {
            try handle(.inf, bytes, first + 8, end, lineNumber)
            return .tag(.inf)
        }
        guard hasPrefix(bytes, first, end, "#EXT") else { return .comment }
        var nameEnd = first + 1
        while nameEnd < end, bytes[nameEnd] != UInt8(ascii: ":") { nameEnd += 1 }
        var tagNameEnd = nameEnd
        while tagNameEnd > first + 1, isLineSpace(bytes[tagNameEnd - 1]) { tagNameEnd -= 1 }
        let tag = Tag.lookup(bytes, first + 1, tagNameEnd)
        let valueStart = nameEnd < end ? nameEnd + 1 : end
        try handle(tag, bytes, valueStart, end, lineNumber)
        return .tag(tag)
    }

    // MARK: - URI lines

    private mutating func uriLine(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ lineNumber: Int) throws
        -> URIRole
    {
        var end = end
        if tolerant, let pipe = headerSuffixStart(bytes, start, end) {
            warn(
                .urlHeaders, line: lineNumber,
                "request headers after the URL (Kodi's URL|Name=value); the URL is rewritten, the headers kept")
            end = pipe
        }
        let role: URIRole
        if pendingVariantLine > 0 {
            pendingVariantLine = 0
            role = .variant
        } else if pendingSegmentLine > 0 {
            pendingSegmentLine = 0
            role = .segment
            if pendingByteRange {
                if pendingImplicitByteRange {
                    if previousRangedSegmentURI.map({ !equalBytes(bytes, $0, start..<end) }) ?? true {
                        try fail(
                            PlaylistError.invalidByteRange.at(
                                line: lineNumber,
                                "EXT-X-BYTERANGE without offset, but the previous segment is not a range of the same resource"))
                    }
                }
                previousRangedSegmentURI = start..<end
            } else {
                previousRangedSegmentURI = nil
            }
            pendingByteRange = false
            pendingImplicitByteRange = false
        } else {
            try fail(
                PlaylistError.segmentWithoutDuration.at(
                    line: lineNumber, "URI line without a preceding #EXTINF or #EXT-X-STREAM-INF (a segment of unknown duration)"))
            role = .segment
            previousRangedSegmentURI = nil
        }
        try addSlot(bytes, line: lineNumber, start..<end, role: role, rewritable: true)
        return role
    }

    /// Where Kodi's header suffix (`|User-Agent=Kodi%2F20&Referer=…`) starts on a URI line, if it has one: a `|`
    /// followed by `Name=value` items joined by `&`, each name an HTTP header token. A `|` is not a URL character
    /// (it must be percent-encoded), so it cannot be part of the URL.
    func headerSuffixStart(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Int? {
        guard let found = memchr(bytes.baseAddress! + start, Int32(UInt8(ascii: "|")), end - start) else { return nil }
        let pipe = bytes.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
        guard pipe > start else { return nil }
        var i = pipe + 1
        var items = 0
        while i < end {
            let nameStart = i
            while i < end, URIReference.isAlpha(bytes[i]) || (bytes[i] &- UInt8(ascii: "0")) < 10 || bytes[i] == UInt8(ascii: "-") {
                i += 1
            }
            guard i > nameStart, i < end, bytes[i] == UInt8(ascii: "=") else { return nil }
            while i < end, bytes[i] != UInt8(ascii: "&") { i += 1 }
            items += 1
            if i < end { i += 1 }
        }
        return items > 0 ? pipe : nil
    }

    private mutating func addSlot(
        _ bytes: UnsafeBufferPointer<UInt8>, line: Int, _ range: Range<Int>, role: URIRole, rewritable: Bool
    ) throws {
        var hasVariables = false
        // Most URIs have no "{": find the first one with memchr and start the scan there.
        guard !range.isEmpty,
            let brace = memchr(bytes.baseAddress! + range.lowerBound, Int32(UInt8(ascii: "{")), range.count)
        else {
            slots.append(URISlot(lineIndex: line - 1, range: range, role: role, rewritable: rewritable, hasVariables: false))
            return
        }
        var i = bytes.baseAddress!.distance(to: brace.assumingMemoryBound(to: UInt8.self))
        while i + 1 < range.upperBound {
            if bytes[i] == UInt8(ascii: "{"), bytes[i + 1] == UInt8(ascii: "$") {
                hasVariables = true
                var j = i + 2
                while j < range.upperBound, bytes[j] != UInt8(ascii: "}") { j += 1 }
                // An unterminated "{$" is not a reference; it stays literal.
                if j < range.upperBound {
                    let name = String(decoding: UnsafeBufferPointer(rebasing: bytes[(i + 2)..<j]), as: UTF8.self)
                    if !definitions.contains(where: { $0.name == name }) {
                        try fail(
                            PlaylistError.undefinedVariable.at(
                                line: line, "{$\(name)} is used before any EXT-X-DEFINE of it (kept as written)"))
                    }
                    i = j
                }
            }
            i += 1
        }
        slots.append(URISlot(lineIndex: line - 1, range: range, role: role, rewritable: rewritable, hasVariables: hasVariables))
    }

    // MARK: - Tags

    /// The attribute list of a tag: strict, or (tolerant) the items that parse, with a warning when some do not.
    private mutating func attributes(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ line: Int) throws -> [RawAttribute] {
        guard tolerant else { return try scanAttributes(bytes, from: start, to: end, line: line) }
        let (items, malformed) = scanAttributesLeniently(bytes, from: start, to: end)
        if malformed { warn(.malformedAttributes, line: line, "an attribute list that does not parse; its readable items are used") }
        return items
    }

    /// A decimal-integer value; tolerant, a decimal or negative number is read as players read it (a warning).
    private mutating func integer(
        _ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, line: Int, what: String, max: UInt64 = .max
    ) throws {
        guard tolerant else {
            _ = try Numbers.integer(bytes, start, end, line: line, what: what, max: max)
            return
        }
        guard let (value, tolerance) = Numbers.tolerantInteger(bytes, start, end) else {
            warn(.invalidNumber, line: line, "\(what) is not a number (ignored)")
            return
        }
        if let tolerance {
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
            warn(tolerance, line: line, "\(what) \(text) read as \(value)")
        }
        if value > max { warn(.absurdValue, line: line, "\(what) is out of range") }
    }

    private mutating func handle(_ tag: Tag, _ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ line: Int) throws {
        // Spaces around a value (`#EXT-X-VERSION:3 `) are tolerated here as the typed views tolerate them.
        var start = start, end = end
        while start < end, isLineSpace(bytes[start]) { start += 1 }
        while end > start, isLineSpace(bytes[end - 1]) { end -= 1 }
        switch tag.scope {
        case .master:
            if mediaTagLine > 0 {
                try fail(
                    PlaylistError.mixedPlaylistKinds.at(
                        line: line, "multivariant tag #\(tag.rawValue) in a media playlist (media tag at line \(mediaTagLine))"))
            }
            if masterTagLine == 0 { masterTagLine = line }
        case .media:
            if masterTagLine > 0 {
                try fail(
                    PlaylistError.mixedPlaylistKinds.at(
                        line: line, "media tag #\(tag.rawValue) in a multivariant playlist (multivariant tag at line \(masterTagLine))"))
            }
            if mediaTagLine == 0 { mediaTagLine = line }
        case .any: break
        }

        switch tag {
        case .inf:
            sawMediaTimeline = true
            if pendingSegmentLine > 0 {
                try fail(PlaylistError.missingURI.at(line: pendingSegmentLine, "#EXTINF is not followed by a segment URI (ignored)"))
            }
            var durationEnd = start
            while durationEnd < end, bytes[durationEnd] != UInt8(ascii: ",") { durationEnd += 1 }
            var trimmed = durationEnd
            while trimmed > start, isLineSpace(bytes[trimmed - 1]) { trimmed -= 1 }
            if let duration = Numbers.decimal(bytes, start, trimmed) {
                if duration < 0, tolerant {
                    isChannelList = true
                    warn(.channelList, line: line, "#EXTINF with a negative duration: an IPTV channel list")
                } else if !(duration >= 0 && duration <= Numbers.maxSegmentDuration) {
                    try fail(PlaylistError.absurdValue.at(line: line, "segment duration \(duration) s"))
                }
            } else if tolerant, let (duration, _) = Numbers.leadingDecimal(bytes, start, trimmed) {
                // `#EXTINF:-1 tvg-id="…" group-title="…",Name` (IPTV) or `#EXTINF:10.000 tvg-id="BBC",`.
                if duration < 0 {
                    isChannelList = true
                    warn(.channelList, line: line, "#EXTINF with a negative duration and attributes: an IPTV channel list")
                } else {
                    warn(.durationWithAttributes, line: line, "#EXTINF duration \(duration) followed by attributes")
                }
            } else {
                try fail(PlaylistError.segmentWithoutDuration.at(line: line, "#EXTINF has no valid duration"), .invalidNumber)
            }
            pendingSegmentLine = line
        case .streamInf:
            if pendingVariantLine > 0 {
                try fail(PlaylistError.missingURI.at(line: pendingVariantLine, "#EXT-X-STREAM-INF is not followed by a URI (ignored)"))
            }
            pendingVariantLine = line
            let attributes = try attributes(bytes, start, end, line)
            try checkBandwidth(attributes, bytes, line)
        case .targetDuration:
            sawMediaTimeline = true
            try integer(bytes, start, end, line: line, what: "EXT-X-TARGETDURATION", max: UInt64(Numbers.maxSegmentDuration))
        case .mediaSequence:
            try integer(bytes, start, end, line: line, what: "EXT-X-MEDIA-SEQUENCE")
        case .discontinuitySequence:
            try integer(bytes, start, end, line: line, what: "EXT-X-DISCONTINUITY-SEQUENCE")
        case .version:
            try integer(bytes, start, end, line: line, what: "EXT-X-VERSION", max: 1000)
        case .byteRange:
            var at = start
            while at < end, bytes[at] != UInt8(ascii: "@") { at += 1 }
            let length = Numbers.integer(bytes, start, at)
            let offset: (value: UInt64, overflow: Bool)? = at < end ? Numbers.integer(bytes, at + 1, end) : (0, false)
            guard let length, !length.overflow, length.value <= Numbers.maxByteOffset, let offset, !offset.overflow,
                offset.value <= Numbers.maxByteOffset
            else {
                let what = length == nil || offset == nil ? "is not n[@o]" : "is out of range"
                let error = length == nil || offset == nil ? PlaylistError.invalidNumber : PlaylistError.absurdValue
                try fail(error.at(line: line, "EXT-X-BYTERANGE \(what) (ignored)"), .invalidByteRange)
                return
            }
            if at == end { pendingImplicitByteRange = true }
            pendingByteRange = true
        case .key, .sessionKey:
            let attributes = try attributes(bytes, start, end, line)
            guard let method = attributes.first(where: { $0.nameEquals("METHOD", in: bytes) }) else {
                try fail(PlaylistError.missingAttribute.at(line: line, "#\(tag.rawValue) without METHOD (ignored)"))
                return
            }
            if let iv = attributes.first(where: { $0.nameEquals("IV", in: bytes) }) {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[iv.valueStart..<iv.valueEnd]), as: UTF8.self)
                // A hexadecimal-sequence may hold variable references (RFC 8216bis §4.3): checked once substituted,
                // unless a value comes from elsewhere (IMPORT, QUERYPARAM).
                if let substituted = substituteDefined(text), Numbers.hexBytes(substituted).map({ $0.count <= 16 }) != true {
                    try fail(PlaylistError.invalidNumber.at(line: line, "IV is not a 128-bit hexadecimal number"), .invalidIV)
                }
            }
            let isNone = method.valueEquals("NONE", in: bytes)
            let uri = attributes.first(where: { $0.nameEquals("URI", in: bytes) })
            if !isNone && uri == nil {
                try fail(PlaylistError.missingAttribute.at(line: line, "#\(tag.rawValue) with METHOD other than NONE needs a URI"))
            }
            if let uri {
                // Every method's key at an http(s) URI in the identity key format (AES-128, SAMPLE-AES,
                // SAMPLE-AES-CTR, AES-256, AES-256-CTR) is the key itself, which a proxy can keep; another KEYFORMAT
                // names a licence server (Widevine, PlayReady, FairPlay) whose answer depends on the player's request.
                let keyFormat = attributes.first(where: { $0.nameEquals("KEYFORMAT", in: bytes) })
                try addSlot(
                    bytes, line: line, uri.valueStart..<uri.valueEnd, role: tag == .key ? .key : .sessionKey,
                    rewritable: !isNone && (keyFormat == nil || keyFormat!.valueEquals("identity", in: bytes)))
            }
        case .map:
            try attributeSlot(tag, bytes, start, end, line, name: "URI", role: .map, required: true)
        case .part:
            try attributeSlot(tag, bytes, start, end, line, name: "URI", role: .part, required: true)
        case .preloadHint:
            try attributeSlot(tag, bytes, start, end, line, name: "URI", role: .preloadHint, required: true)
        case .renditionReport:
            try attributeSlot(tag, bytes, start, end, line, name: "URI", role: .renditionReport, required: true)
        case .media:
            try attributeSlot(tag, bytes, start, end, line, name: "URI", role: .rendition, required: false)
        case .iFrameStreamInf:
            let attributes = try attributeSlot(tag, bytes, start, end, line, name: "URI", role: .iFramePlaylist, required: true)
            try checkBandwidth(attributes, bytes, line)
        case .imageStreamInf:
            try attributeSlot(tag, bytes, start, end, line, name: "URI", role: .imagePlaylist, required: true)
        case .sessionData:
            try attributeSlot(tag, bytes, start, end, line, name: "URI", role: .sessionData, required: false)
        case .contentSteering:
            try attributeSlot(tag, bytes, start, end, line, name: "SERVER-URI", role: .steeringServer, required: true)
        case .dateRange:
            let attributes = try attributes(bytes, start, end, line)
            for attribute in attributes {
                if attribute.nameEquals("X-ASSET-URI", in: bytes) {
                    try addSlot(bytes, line: line, attribute.valueStart..<attribute.valueEnd, role: .interstitialAsset, rewritable: true)
                } else if attribute.nameEquals("X-ASSET-LIST", in: bytes) {
                    try addSlot(
                        bytes, line: line, attribute.valueStart..<attribute.valueEnd, role: .interstitialAssetList, rewritable: true)
                }
            }
        case .define:
            try define(bytes, start, end, line)
        case .start, .partInf, .serverControl, .skip:
            _ = try attributes(bytes, start, end, line)
        case .extm3u, .independentSegments, .endList, .playlistType, .iFramesOnly, .discontinuity, .programDateTime, .gap,
            .bitrate, .allowCache, .unknown:
            break
        }
    }

    /// `text` with each `{$name}` defined by a `NAME`/`VALUE` so far replaced; nil when a reference takes its value
    /// from elsewhere (IMPORT, QUERYPARAM) or from nowhere, so it cannot be checked here.
    private func substituteDefined(_ text: String) -> String? {
        guard text.utf8.contains(UInt8(ascii: "{")) else { return text }
        var values: [String: String] = [:]
        for definition in definitions {
            if case .value(let value) = definition.source { values[definition.name] = value }
        }
        return try? VariableTable(values: values).substitute(text, line: 0)
    }

    @discardableResult
    private mutating func attributeSlot(
        _ tag: Tag, _ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ line: Int, name: StaticString,
        role: URIRole, required: Bool
    ) throws -> [RawAttribute] {
        let attributes = try attributes(bytes, start, end, line)
        if let uri = attributes.first(where: { $0.nameEquals(name, in: bytes) }) {
            try addSlot(bytes, line: line, uri.valueStart..<uri.valueEnd, role: role, rewritable: true)
        } else if required {
            try fail(PlaylistError.missingAttribute.at(line: line, "#\(tag.rawValue) without \(name)"))
        }
        return attributes
    }

    private mutating func checkBandwidth(_ attributes: [RawAttribute], _ bytes: UnsafeBufferPointer<UInt8>, _ line: Int) throws {
        for attribute in attributes
        where attribute.nameEquals("BANDWIDTH", in: bytes) || attribute.nameEquals("AVERAGE-BANDWIDTH", in: bytes) {
            try integer(bytes, attribute.valueStart, attribute.valueEnd, line: line, what: "BANDWIDTH", max: Numbers.maxBandwidth)
        }
    }

    private mutating func define(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ line: Int) throws {
        let list = AttributeList(try attributes(bytes, start, end, line), bytes)
        let name: String
        let source: VariableDefinition.Source
        if let n = list["NAME"] {
            guard let value = list["VALUE"] else {
                return try fail(PlaylistError.invalidDefine.at(line: line, "EXT-X-DEFINE NAME without VALUE"))
            }
            name = n
            source = .value(value)
        } else if let n = list["IMPORT"] {
            name = n
            source = .import
        } else if let n = list["QUERYPARAM"] {
            name = n
            source = .queryParameter
        } else {
            return try fail(PlaylistError.invalidDefine.at(line: line, "EXT-X-DEFINE needs NAME, IMPORT or QUERYPARAM"))
        }
        guard !name.isEmpty,
            name.utf8.allSatisfy({
                URIReference.isAlpha($0) || ($0 &- UInt8(ascii: "0")) < 10 || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_")
            })
        else {
            return try fail(PlaylistError.invalidDefine.at(line: line, "invalid variable name"))
        }
        if definitions.contains(where: { $0.name == name }) {
            return try fail(PlaylistError.invalidDefine.at(line: line, "variable \(name) is defined twice (the first one is used)"))
        }
        definitions.append(VariableDefinition(name: name, source: source, line: line))
    }
}

@inline(__always)
func isLineSpace(_ c: UInt8) -> Bool { c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r") }

func hasPrefix(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ prefix: StaticString) -> Bool {
    let n = prefix.utf8CodeUnitCount
    guard end - start >= n else { return false }
    let p = prefix.utf8Start
    for k in 0..<n where p[k] != bytes[start + k] { return false }
    return true
}

func equalBytes(_ bytes: UnsafeBufferPointer<UInt8>, _ a: Range<Int>, _ b: Range<Int>) -> Bool {
    guard a.count == b.count else { return false }
    for k in 0..<a.count where bytes[a.lowerBound + k] != bytes[b.lowerBound + k] { return false }
    return true
}
