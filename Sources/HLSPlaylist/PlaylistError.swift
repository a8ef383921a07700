/// An error found while parsing or rewriting a playlist.
///
/// Equality compares the kind of error only, so tests and callers can write
/// `error == .truncatedAttributeList` while ``line`` and ``detail`` say where and why.
public struct PlaylistError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Hashable, Sendable {
        case notHLS
        case tooLarge
        case truncatedAttributeList
        case invalidAttribute
        case missingAttribute
        case segmentWithoutDuration
        case missingURI
        case absurdValue
        case invalidNumber
        case mixedPlaylistKinds
        case undefinedVariable
        case invalidDefine
        case invalidByteRange
        case invalidURI
        case invalidReplacement
    }

    private var code: Code
    /// The 1-based line number the error was found on, or 0 when it concerns the whole input.
    public private(set) var line: Int
    /// A human-readable explanation (never contains key material).
    public private(set) var detail: String

    private init(code: Code, line: Int = 0, detail: String = "") {
        self.code = code
        self.line = line
        self.detail = detail
    }

    /// The stable machine-readable name of the error kind, e.g. `truncatedAttributeList`.
    public var name: String { code.rawValue }

    /// The input does not start with `#EXTM3U`.
    public static let notHLS = PlaylistError(code: .notHLS)
    /// The input is larger than the configured limit.
    public static let tooLarge = PlaylistError(code: .tooLarge)
    /// An attribute list ends inside a quoted string or after `NAME=`.
    public static let truncatedAttributeList = PlaylistError(code: .truncatedAttributeList)
    /// An attribute list item is not `NAME=value`.
    public static let invalidAttribute = PlaylistError(code: .invalidAttribute)
    /// A required attribute (such as `URI` on `EXT-X-MAP`) is missing.
    public static let missingAttribute = PlaylistError(code: .missingAttribute)
    /// A URI line in a media playlist that no `#EXTINF` precedes.
    public static let segmentWithoutDuration = PlaylistError(code: .segmentWithoutDuration)
    /// `#EXTINF` or `#EXT-X-STREAM-INF` that is not followed by a URI line.
    public static let missingURI = PlaylistError(code: .missingURI)
    /// A number outside any sensible range (negative duration, a 10-year segment, an overflowing offset).
    public static let absurdValue = PlaylistError(code: .absurdValue)
    /// A value that should be a number is not one.
    public static let invalidNumber = PlaylistError(code: .invalidNumber)
    /// Master-playlist and media-playlist tags in one file.
    public static let mixedPlaylistKinds = PlaylistError(code: .mixedPlaylistKinds)
    /// A `{$name}` reference to a variable that no `EXT-X-DEFINE` (or import) provides.
    public static let undefinedVariable = PlaylistError(code: .undefinedVariable)
    /// A malformed or duplicate `EXT-X-DEFINE`.
    public static let invalidDefine = PlaylistError(code: .invalidDefine)
    /// An `EXT-X-BYTERANGE` without offset whose previous segment is not a range of the same resource.
    public static let invalidByteRange = PlaylistError(code: .invalidByteRange)
    /// A URI that cannot be resolved (for example a relative reference against a base without scheme).
    public static let invalidURI = PlaylistError(code: .invalidURI)
    /// A rewrite closure returned a value that cannot be written where the URI stands (a quote or a line break).
    public static let invalidReplacement = PlaylistError(code: .invalidReplacement)

    /// The same error kind, located at `line`, with an explanation.
    public func at(line: Int, _ detail: String) -> PlaylistError {
        PlaylistError(code: code, line: line, detail: detail)
    }

    public static func == (lhs: PlaylistError, rhs: PlaylistError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var description: String {
        var text = "playlist error \(code.rawValue)"
        if line > 0 { text += " at line \(line)" }
        if !detail.isEmpty { text += ": \(detail)" }
        return text
    }
}
