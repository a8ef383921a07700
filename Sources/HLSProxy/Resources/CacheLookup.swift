import HLSCacheStore

/// What the disk cache has for a request's key (``ResourceService``'s lookup, after the live playlists in memory and
/// the replayed hits): how the request is answered.
enum CacheLookup {
    /// A stored object, pinned: served from its file.
    case hit(CachedObject, CachePin)
    /// A stored playlist fetched with the request's tokens (or prewarmed), pinned: its rewritten copy is served.
    case playlistHit(CachedObject, CachePin)
    /// A stored playlist fetched with other tokens than the request's: fetched again with the request's (origins such
    /// as Wowza write the viewer's token into the URIs), the stored one served only if the origin fails.
    case playlistForOtherTokens
    /// Nothing usable stored: a miss.
    case miss

    /// What a stored object found for a request is.
    enum Stored: Equatable {
        case object
        case playlist
        case playlistForOtherTokens
        /// A 16- or 32-byte object: a key an older version kept in clear (keys have a sealed store of their own),
        /// removed and served as a miss, which does not store it again (``KeySizedBody``).
        case keySizedLeftover
    }

    /// - Parameters:
    ///   - otherTokens: whether a stored playlist was fetched with other tokens than the request's (asked only for
    ///     playlists).
    static func classify(kind: CacheObjectKind, size: Int64, otherTokens: () -> Bool) -> Stored {
        if kind == .playlist { return otherTokens() ? .playlistForOtherTokens : .playlist }
        if KeySizedBody.isKeySize(size) { return .keySizedLeftover }
        return .object
    }
}
