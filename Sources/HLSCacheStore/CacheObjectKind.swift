/// What a cached object is; stored as text in the index so new kinds need no migration.
package struct CacheObjectKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The stored text.
    package let rawValue: String

    /// Wraps any stored text, including kinds this version does not know.
    package init(rawValue: String) { self.rawValue = rawValue }

    /// A media segment (or a partial segment).
    package static let segment = CacheObjectKind(rawValue: "segment")
    /// A media or master playlist.
    package static let playlist = CacheObjectKind(rawValue: "playlist")
    /// An `EXT-X-MAP` initialisation section.
    package static let initSection = CacheObjectKind(rawValue: "init")
    /// A content key (any method), stored sealed (docs/design.md §7).
    package static let key = CacheObjectKind(rawValue: "key")
    /// Anything else (subtitles, session data, steering manifests).
    package static let other = CacheObjectKind(rawValue: "other")

    package var description: String { rawValue }
}
