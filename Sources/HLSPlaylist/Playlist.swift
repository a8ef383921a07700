/// A parsed HLS playlist: the exact input bytes plus an index of its lines, tags and URIs.
///
/// The model never re-renders what it did not change: ``serialize()`` reproduces the input byte for byte
/// (unknown tags, comments, attribute order and quoting, blank lines, CRLF, a UTF-8 BOM), and
/// ``rewrite(baseURL:imports:_:)`` changes URI values and nothing else. The typed views (``media(baseURL:imports:)``,
/// ``master(baseURL:imports:)``) are computed from it on demand.
public struct Playlist: Sendable {
    /// The input, unchanged.
    public let bytes: [UInt8]
    /// Every line, in order. Byte positions index ``bytes``.
    public let lines: [Line]
    public let kind: PlaylistKind
    /// Every URI-bearing value, in document order.
    public let uriSlots: [URISlot]
    /// `EXT-X-DEFINE` tags, in order.
    public let definitions: [VariableDefinition]
    /// Read with ``ParseOptions/tolerant``: the typed views read values as players do too.
    public let isTolerant: Bool
    /// What the tolerant reader accepted that the RFC does not allow: the first of each kind, with its line.
    /// Always empty for the strict reader (which throws instead).
    public let warnings: [PlaylistWarning]
    /// An IPTV channel list (`#EXTINF:-1 tvg-id=… group-title=…,Name` followed by a stream URL): each URI line is a
    /// channel (a playlist or an endless stream), not a segment. Only the tolerant reader recognises one.
    public let isChannelList: Bool

    /// Parses `bytes`.
    /// - Throws: ``PlaylistError`` with the line number of the first problem; with ``ParseOptions/tolerant`` only
    ///   ``PlaylistError/notHLS`` and ``PlaylistError/tooLarge``.
    public init(bytes: [UInt8], options: ParseOptions = ParseOptions()) throws {
        guard bytes.count <= options.maxBytes else {
            throw PlaylistError.tooLarge.at(line: 0, "\(bytes.count) bytes is over the limit of \(options.maxBytes)")
        }
        var parser = PlaylistParser(tolerant: options.tolerant)
        try bytes.withUnsafeBufferPointer { try parser.parse($0) }
        isTolerant = options.tolerant
        warnings = parser.warnings
        isChannelList = parser.isChannelList
        self.bytes = bytes
        lines = parser.lines
        kind = parser.kind
        uriSlots = parser.slots
        definitions = parser.definitions
    }

    /// Parses UTF-8 text.
    public init(_ text: String, options: ParseOptions = ParseOptions()) throws {
        try self.init(bytes: Array(text.utf8), options: options)
    }

    /// The playlist as bytes, rebuilt from its lines.
    public func serialize() -> [UInt8] {
        bytes.withUnsafeBufferPointer { source in
            var out: [UInt8] = []
            out.reserveCapacity(source.count)
            let firstStart = lines.first?.range.lowerBound ?? source.count
            out.append(contentsOf: UnsafeBufferPointer(rebasing: source[0..<firstStart]))  // the BOM, if any
            for line in lines {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: source[line.range]))
                switch line.terminator {
                case .none: break
                case .lf: out.append(UInt8(ascii: "\n"))
                case .crlf:
                    out.append(UInt8(ascii: "\r"))
                    out.append(UInt8(ascii: "\n"))
                }
            }
            return out
        }
    }

    /// A media playlist without `EXT-X-ENDLIST`: live (or an event still growing), so any copy of it goes stale.
    public var isLiveMedia: Bool {
        guard kind == .media else { return false }
        return !lines.contains { line in
            if case .tag(.endList) = line.kind { return true }
            return false
        }
    }

    /// The text of line `index` (0-based), without its terminator.
    /// A URI line's bytes that are not UTF-8 are given as percent escapes (``URIResolver/text(of:)``).
    public func text(ofLine index: Int) -> String {
        if case .uri = lines[index].kind { return URIResolver.text(of: bytes[lines[index].range]) }
        return String(decoding: bytes[lines[index].range], as: UTF8.self)
    }

    /// The raw text of a URI slot, as written (before variable substitution); bytes that are not UTF-8 as percent
    /// escapes (``URIResolver/text(of:)``).
    public func rawValue(of slot: URISlot) -> String {
        URIResolver.text(of: bytes[slot.range])
    }

    /// The attribute list of a tag line (empty for tags without one).
    public func attributes(ofLine index: Int) throws -> AttributeList {
        let line = lines[index]
        guard case .tag = line.kind, let colon = bytes[line.range].firstIndex(of: UInt8(ascii: ":")) else {
            return AttributeList([], UnsafeBufferPointer(start: nil, count: 0))
        }
        return try bytes.withUnsafeBufferPointer { buffer in
            if isTolerant {
                return AttributeList(
                    scanAttributesLeniently(buffer, from: colon + 1, to: line.range.upperBound).items, buffer, tolerant: true)
            }
            return AttributeList(try scanAttributes(buffer, from: colon + 1, to: line.range.upperBound, line: index + 1), buffer)
        }
    }

    /// The value after `#TAG:` of a tag line.
    func tagValue(ofLine index: Int) -> String {
        let line = lines[index]
        guard let colon = bytes[line.range].firstIndex(of: UInt8(ascii: ":")) else { return "" }
        return String(decoding: bytes[(colon + 1)..<line.range.upperBound], as: UTF8.self)
    }
}

/// Limits applied while parsing.
public struct ParseOptions: Sendable {
    /// Inputs larger than this are refused with ``PlaylistError/tooLarge``. Default 16 MiB.
    public var maxBytes: Int
    /// Read as players read: refuse only what is no playlist at all (``PlaylistError/notHLS``, ``PlaylistError/tooLarge``);
    /// every other departure from the RFC becomes a ``PlaylistWarning`` (``Playlist/warnings``). Default false (strict).
    public var tolerant: Bool
    public init(maxBytes: Int = 16 << 20, tolerant: Bool = false) {
        self.maxBytes = maxBytes
        self.tolerant = tolerant
    }
}

public enum PlaylistKind: String, Sendable, Hashable {
    /// A multivariant (master) playlist: variants and renditions.
    case master
    /// A media playlist: segments.
    case media
}

public enum LineTerminator: UInt8, Sendable, Hashable {
    case none, lf, crlf
}

public enum LineKind: Sendable, Hashable {
    case blank
    /// A line starting with `#` but not `#EXT`.
    case comment
    case tag(Tag)
    /// A URI line; the role says whether it is a segment or a variant.
    case uri(URIRole)
}

public struct Line: Sendable, Hashable {
    /// The content's byte range in ``Playlist/bytes``, without the terminator.
    public let range: Range<Int>
    public let terminator: LineTerminator
    public let kind: LineKind
}

/// A URI value inside the playlist.
public struct URISlot: Sendable, Hashable {
    /// 0-based index into ``Playlist/lines``.
    public let lineIndex: Int
    /// The value's byte range (inside the quotes for attributes, trimmed for URI lines).
    public let range: Range<Int>
    public let role: URIRole
    /// False for keys the proxy must not touch: a `KEYFORMAT` other than `identity` (a licence server), `METHOD=NONE`.
    public let rewritable: Bool
    /// Whether the value contains a `{$name}` variable reference.
    public let hasVariables: Bool
}

/// An `EXT-X-DEFINE` tag.
public struct VariableDefinition: Sendable, Hashable {
    public enum Source: Sendable, Hashable {
        case value(String)
        /// Imported from the multivariant playlist that referenced this one.
        case `import`
        /// Taken from the named query parameter of the playlist's own URL.
        case queryParameter
    }
    public let name: String
    public let source: Source
    public let line: Int
}
