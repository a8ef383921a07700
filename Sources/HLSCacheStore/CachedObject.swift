import Foundation
import HLSCacheCore

/// A complete object in the cache, as returned by ``CacheStore/lookup(_:)``.
///
/// The file at ``path`` is immutable: a newer version of the same key is written to a new file and renamed
/// over it, so a reader that opened the old file keeps reading consistent bytes.
package struct CachedObject: Sendable, Hashable {
    /// The cache key the object was stored under.
    package let key: CacheKey
    /// SHA-256 hex of `key.value`; names the file.
    package let keyHash: String
    /// Absolute path of the object file.
    package let path: String
    /// Size in bytes.
    package let size: Int64
    /// The `Content-Type` to serve, if known.
    package let contentType: String?
    /// A strong entity tag, quoted (`"…"`), ready for an `ETag` header.
    package let etag: String
    /// The origin's `Last-Modified`, if it sent one.
    package let lastModified: Date?
    /// When the object was stored.
    package let createdAt: Date
    /// When the object stops being served (live playlists, keys); `nil` for never.
    package let expiresAt: Date?
    /// What the object is.
    package let kind: CacheObjectKind
    /// Whether an item holds it (locked objects are never evicted).
    package let locked: Bool
    /// The URL that answered when the origin redirected, `nil` when it was the key's own URL: relative URIs in
    /// a stored playlist resolve against it, as they did when it was fetched.
    package let location: String?
    /// A digest of the volatile query parameters (the tokens) a playlist was fetched with, when its writer gave
    /// one: a player coming with other tokens gets a playlist fetched with them (origins write tokens into the
    /// URIs they return). Never the tokens themselves.
    package let tokens: String?
    /// For a slice of a large object: which object, which slice, and the whole object's size (``SliceLayout``).
    package let slice: ObjectSlice?

    /// Whether the object has expired at `date`.
    package func isExpired(at date: Date = Date()) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= date
    }
}
