#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The single pass that indexes a playlist: splits lines, classifies tags, finds every URI value and checks
/// the structure (one kind of playlist, every EXTINF followed by a URI, sane numbers, defined variables).
struct PlaylistParser {
    private(set) var lines: [Line] = []
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

    mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws {
        var start = 0
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { start = 3 }
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
            throw PlaylistError.missingURI.at(line: pendingSegmentLine, "#EXTINF is not followed by a segment URI")
        }
        if pendingVariantLine > 0 {
            throw PlaylistError.missingURI.at(line: pendingVariantLine, "#EXT-X-STREAM-INF is not followed by a URI")
        }
        kind = masterTagLine > 0 ? .master : .media
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
        let role: URIRole
        if pendingVariantLine > 0 {
            pendingVariantLine = 0
            role = .variant
        } else if pendingSegmentLine > 0 {
            pendingSegmentLine = 0
            role = .segment
            if pendingByteRange {
                if pendingImplicitByteRange {
                    guard let previous = previousRangedSegmentURI, equalBytes(bytes, previous, start..<end) else {
                        throw PlaylistError.invalidByteRange.at(
                            line: lineNumber,
                            "EXT-X-BYTERANGE without offset, but the previous segment is not a range of the same resource")
                    }
                }
                previousRangedSegmentURI = start..<end
            } else {
                previousRangedSegmentURI = nil
            }
            pendingByteRange = false
            pendingImplicitByteRange = false
        } else {
            throw PlaylistError.segmentWithoutDuration.at(line: lineNumber, "URI line without a preceding #EXTINF or #EXT-X-STREAM-INF")
        }
        try addSlot(bytes, line: lineNumber, start..<end, role: role, rewritable: true)
        return role
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
                    guard definitions.contains(where: { $0.name == name }) else {
                        throw PlaylistError.undefinedVariable.at(line: line, "{$\(name)} is used before any EXT-X-DEFINE of it")
                    }
                    i = j
                }
            }
            i += 1
        }
        slots.append(URISlot(lineIndex: line - 1, range: range, role: role, rewritable: rewritable, hasVariables: hasVariables))
    }

    // MARK: - Tags

    private mutating func handle(_ tag: Tag, _ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ line: Int) throws {
        // Spaces around a value (`#EXT-X-VERSION:3 `) are tolerated here as the typed views tolerate them.
        var start = start, end = end
        while start < end, isLineSpace(bytes[start]) { start += 1 }
        while end > start, isLineSpace(bytes[end - 1]) { end -= 1 }
        switch tag.scope {
        case .master:
            if mediaTagLine > 0 {
                throw PlaylistError.mixedPlaylistKinds.at(
                    line: line, "multivariant tag #\(tag.rawValue) in a media playlist (media tag at line \(mediaTagLine))")
            }
            if masterTagLine == 0 { masterTagLine = line }
        case .media:
            if masterTagLine > 0 {
                throw PlaylistError.mixedPlaylistKinds.at(
                    line: line, "media tag #\(tag.rawValue) in a multivariant playlist (multivariant tag at line \(masterTagLine))")
            }
            if mediaTagLine == 0 { mediaTagLine = line }
        case .any: break
        }

        switch tag {
        case .inf:
            if pendingSegmentLine > 0 {
                throw PlaylistError.missingURI.at(line: pendingSegmentLine, "#EXTINF is not followed by a segment URI")
            }
            var durationEnd = start
            while durationEnd < end, bytes[durationEnd] != UInt8(ascii: ",") { durationEnd += 1 }
            var trimmed = durationEnd
            while trimmed > start, isLineSpace(bytes[trimmed - 1]) { trimmed -= 1 }
            guard let duration = Numbers.decimal(bytes, start, trimmed) else {
                throw PlaylistError.segmentWithoutDuration.at(line: line, "#EXTINF has no valid duration")
            }
            guard duration >= 0, duration <= Numbers.maxSegmentDuration else {
                throw PlaylistError.absurdValue.at(line: line, "segment duration \(duration) s")
            }
            pendingSegmentLine = line
        case .streamInf:
            if pendingVariantLine > 0 {
                throw PlaylistError.missingURI.at(line: pendingVariantLine, "#EXT-X-STREAM-INF is not followed by a URI")
            }
            let attributes = try scanAttributes(bytes, from: start, to: end, line: line)
            try checkBandwidth(attributes, bytes, line)
            pendingVariantLine = line
        case .targetDuration:
            _ = try Numbers.integer(bytes, start, end, line: line, what: "EXT-X-TARGETDURATION", max: UInt64(Numbers.maxSegmentDuration))
        case .mediaSequence:
            _ = try Numbers.integer(bytes, start, end, line: line, what: "EXT-X-MEDIA-SEQUENCE")
        case .discontinuitySequence:
            _ = try Numbers.integer(bytes, start, end, line: line, what: "EXT-X-DISCONTINUITY-SEQUENCE")
        case .version:
            _ = try Numbers.integer(bytes, start, end, line: line, what: "EXT-X-VERSION", max: 1000)
        case .byteRange:
            var at = start
            while at < end, bytes[at] != UInt8(ascii: "@") { at += 1 }
            _ = try Numbers.integer(bytes, start, at, line: line, what: "EXT-X-BYTERANGE length", max: Numbers.maxByteOffset)
            if at < end {
                _ = try Numbers.integer(bytes, at + 1, end, line: line, what: "EXT-X-BYTERANGE offset", max: Numbers.maxByteOffset)
            } else {
                pendingImplicitByteRange = true
            }
            pendingByteRange = true
        case .key, .sessionKey:
            let attributes = try scanAttributes(bytes, from: start, to: end, line: line)
            guard let method = attributes.first(where: { $0.nameEquals("METHOD", in: bytes) }) else {
                throw PlaylistError.missingAttribute.at(line: line, "#\(tag.rawValue) without METHOD")
            }
            if let iv = attributes.first(where: { $0.nameEquals("IV", in: bytes) }) {
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[iv.valueStart..<iv.valueEnd]), as: UTF8.self)
                guard let ivBytes = Numbers.hexBytes(text), ivBytes.count <= 16 else {
                    throw PlaylistError.invalidNumber.at(line: line, "IV is not a 128-bit hexadecimal number")
                }
            }
            let isNone = method.valueEquals("NONE", in: bytes)
            let uri = attributes.first(where: { $0.nameEquals("URI", in: bytes) })
            if !isNone && uri == nil {
                throw PlaylistError.missingAttribute.at(line: line, "#\(tag.rawValue) with METHOD other than NONE needs a URI")
            }
            if let uri {
                try addSlot(
                    bytes, line: line, uri.valueStart..<uri.valueEnd, role: tag == .key ? .key : .sessionKey,
                    rewritable: method.valueEquals("AES-128", in: bytes))
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
            let attributes = try scanAttributes(bytes, from: start, to: end, line: line)
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
            _ = try scanAttributes(bytes, from: start, to: end, line: line)
        case .extm3u, .independentSegments, .endList, .playlistType, .iFramesOnly, .discontinuity, .programDateTime, .gap,
            .bitrate, .allowCache, .unknown:
            break
        }
    }

    @discardableResult
    private mutating func attributeSlot(
        _ tag: Tag, _ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ line: Int, name: StaticString,
        role: URIRole, required: Bool
    ) throws -> [RawAttribute] {
        let attributes = try scanAttributes(bytes, from: start, to: end, line: line)
        if let uri = attributes.first(where: { $0.nameEquals(name, in: bytes) }) {
            try addSlot(bytes, line: line, uri.valueStart..<uri.valueEnd, role: role, rewritable: true)
        } else if required {
            throw PlaylistError.missingAttribute.at(line: line, "#\(tag.rawValue) without \(name)")
        }
        return attributes
    }

    private func checkBandwidth(_ attributes: [RawAttribute], _ bytes: UnsafeBufferPointer<UInt8>, _ line: Int) throws {
        for attribute in attributes where attribute.nameEquals("BANDWIDTH", in: bytes) || attribute.nameEquals("AVERAGE-BANDWIDTH", in: bytes) {
            _ = try Numbers.integer(
                bytes, attribute.valueStart, attribute.valueEnd, line: line, what: "BANDWIDTH", max: Numbers.maxBandwidth)
        }
    }

    private mutating func define(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, _ line: Int) throws {
        let list = AttributeList(try scanAttributes(bytes, from: start, to: end, line: line), bytes)
        let name: String
        let source: VariableDefinition.Source
        if let n = list["NAME"] {
            guard let value = list["VALUE"] else {
                throw PlaylistError.invalidDefine.at(line: line, "EXT-X-DEFINE NAME without VALUE")
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
            throw PlaylistError.invalidDefine.at(line: line, "EXT-X-DEFINE needs NAME, IMPORT or QUERYPARAM")
        }
        guard !name.isEmpty,
            name.utf8.allSatisfy({ URIReference.isAlpha($0) || ($0 &- UInt8(ascii: "0")) < 10 || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") })
        else {
            throw PlaylistError.invalidDefine.at(line: line, "invalid variable name")
        }
        if definitions.contains(where: { $0.name == name }) {
            throw PlaylistError.invalidDefine.at(line: line, "variable \(name) is defined twice")
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
