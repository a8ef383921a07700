import Foundation
import GRDB
import HLSCacheCore

/// One row of the `objects` table, in memory. Times are Unix seconds, as stored.
struct ObjectRow: Sendable, Hashable {
    var keyHash: String
    var key: String
    var size: Int64
    var contentType: String?
    var etag: String
    var lastModified: Double?
    var createdAt: Double
    var lastAccess: Double
    var expiresAt: Double?
    var locked: Bool
    var kind: String
    /// The URL that answered when the origin redirected (a playlist's base for relative URIs); `nil` otherwise.
    var location: String?
    /// A digest of the volatile query parameters (tokens) a playlist was fetched with; `nil` otherwise.
    var tokens: String?
    /// For a slice of a large object (migration `v6-slices`): its set, index and the whole object's size.
    var slice: ObjectSlice?

    static let columns =
        "key_hash, key, size, content_type, etag, last_modified, created_at, last_access, expires_at, locked, kind, location, tokens, slice_of, slice_index, object_size"

    init(
        keyHash: String, key: String, size: Int64, contentType: String?, etag: String, lastModified: Double?,
        createdAt: Double, lastAccess: Double, expiresAt: Double?, locked: Bool, kind: String, location: String? = nil,
        tokens: String? = nil,
        slice: ObjectSlice? = nil
    ) {
        self.keyHash = keyHash
        self.key = key
        self.size = size
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
        self.createdAt = createdAt
        self.lastAccess = lastAccess
        self.expiresAt = expiresAt
        self.locked = locked
        self.kind = kind
        self.location = location
        self.tokens = tokens
        self.slice = slice
    }

    init(row: Row) {
        keyHash = row["key_hash"]
        key = row["key"]
        size = row["size"]
        contentType = row["content_type"]
        etag = row["etag"]
        lastModified = row["last_modified"]
        createdAt = row["created_at"]
        lastAccess = row["last_access"]
        expiresAt = row["expires_at"]
        locked = row["locked"]
        kind = row["kind"]
        location = row["location"]
        tokens = row["tokens"]
        let set: String? = row["slice_of"]
        let index: Int64? = row["slice_index"]
        let objectSize: Int64? = row["object_size"]
        if let set, let index, let objectSize {
            slice = ObjectSlice(set: set, index: index, objectSize: objectSize)
        } else {
            slice = nil
        }
    }

    var arguments: StatementArguments {
        [
            keyHash, key, size, contentType, etag, lastModified, createdAt, lastAccess, expiresAt, locked, kind, location, tokens,
            slice?.set, slice?.index, slice?.objectSize,
        ]
    }

    func isExpired(at now: Double) -> Bool {
        guard let expiresAt else { return false }
        return expiresAt <= now
    }

    func object(path: String) -> CachedObject {
        CachedObject(
            key: CacheKey(storedValue: key),
            keyHash: keyHash,
            path: path,
            size: size,
            contentType: contentType,
            etag: etag,
            lastModified: lastModified.map { Date(timeIntervalSince1970: $0) },
            createdAt: Date(timeIntervalSince1970: createdAt),
            expiresAt: expiresAt.map { Date(timeIntervalSince1970: $0) },
            kind: CacheObjectKind(rawValue: kind),
            locked: locked,
            location: location,
            tokens: tokens,
            slice: slice
        )
    }
}
