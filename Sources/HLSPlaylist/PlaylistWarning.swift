/// A departure from RFC 8216 that the tolerant reader (``ParseOptions/tolerant``) accepted the way players do,
/// where the strict reader throws a ``PlaylistError``.
///
/// A playlist keeps the first warning of each kind, with its line, and how many lines had it
/// (``Playlist/warnings``): a list of 10,000 IPTV channels has one `channelList` warning, not 10,000.
public struct PlaylistWarning: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Blank lines or spaces before `#EXTM3U`.
        case leadingWhitespace
        /// A decimal where an integer belongs (`TARGETDURATION:2.5`, `BANDWIDTH=1280000.0`): read as its integer part.
        case decimalInteger
        /// A negative number where RFC 8216 wants a non-negative one (`MEDIA-SEQUENCE:-3`): read as 0.
        case negativeNumber
        /// A value that is no number at all, or out of range, where one is expected: ignored.
        case invalidNumber
        /// `#EXTINF` or `#EXT-X-STREAM-INF` with no URI line after it (the last one of a live playlist caught
        /// while the packager appends): ignored.
        case danglingTag
        /// A URI line with no `#EXTINF` before it (a plain list of URLs): a segment of unknown duration.
        case uriWithoutTag
        /// An IPTV channel list (`#EXTINF:-1 tvg-id="…" group-title="…",Name`): each URL is a channel.
        case channelList
        /// Kodi's `URL|User-Agent=…&Referer=…`: request headers after the URL; the URL is rewritten, the suffix kept.
        case urlHeaders
        /// `#EXTINF:10.000 tvg-id="BBC",`: a duration followed by attributes; the duration is read.
        case durationWithAttributes
        /// A tag without an attribute it needs (`EXT-X-MAP` without `URI`, `EXT-X-KEY` without `METHOD`): ignored.
        case missingAttribute
        /// A tag of the other kind of playlist (`EXT-X-SESSION-KEY` in a media playlist): kept, its URI rewritten.
        case misplacedTag
        /// An attribute list that does not parse (an unterminated quote, an item without `=`): the items that do
        /// parse are used, the rest of the line kept as written.
        case malformedAttributes
        /// `{$name}` with no `EXT-X-DEFINE` before it, or a malformed `EXT-X-DEFINE`: the reference stays as written.
        case undefinedVariable
        /// `EXT-X-BYTERANGE` that cannot be read, or without offset after a segment of another resource: ignored.
        case invalidByteRange
        /// An IV that is not a hexadecimal number of at most 128 bits: ignored.
        case invalidIV
        /// A value out of any sensible range (a segment of more than 24 hours).
        case absurdValue
    }

    public let kind: Kind
    /// The 1-based line of the first occurrence.
    public let line: Int
    /// What was found and how it was read (never contains key material).
    public let detail: String
    /// How many times this kind was met in the playlist.
    public internal(set) var count: Int

    public var description: String { "\(kind.rawValue) at line \(line): \(detail)" + (count > 1 ? " (\(count) times)" : "") }
}

extension PlaylistWarning.Kind {
    /// The tolerance for a strict reader's error.
    init(_ error: PlaylistError) {
        switch error {
        case .truncatedAttributeList, .invalidAttribute: self = .malformedAttributes
        case .missingAttribute: self = .missingAttribute
        case .segmentWithoutDuration: self = .uriWithoutTag
        case .missingURI: self = .danglingTag
        case .absurdValue: self = .absurdValue
        case .mixedPlaylistKinds: self = .misplacedTag
        case .undefinedVariable, .invalidDefine: self = .undefinedVariable
        case .invalidByteRange: self = .invalidByteRange
        default: self = .invalidNumber
        }
    }
}
