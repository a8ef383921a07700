/// What a cached object is; stored as text in the index so new kinds need no migration.
public struct CacheObjectKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The stored text.
    public let rawValue: String

    /// Wraps any stored text, including kinds this version does not know.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// A media segment (or a partial segment).
    public static let segment = CacheObjectKind(rawValue: "segment")
    /// A media or master playlist.
    public static let playlist = CacheObjectKind(rawValue: "playlist")
    /// An `EXT-X-MAP` initialisation section.
    public static let initSection = CacheObjectKind(rawValue: "init")
    /// A content key (any method), stored sealed (docs/design.md §7).
    public static let key = CacheObjectKind(rawValue: "key")
    /// Anything else (subtitles, session data, steering manifests).
    public static let other = CacheObjectKind(rawValue: "other")

    public var description: String { rawValue }
}
