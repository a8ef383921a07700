import Foundation
import GRDB
import HLSCacheCore

/// Slices of large objects (``SliceLayout``): each slice is an object of its own — its own file, written through
/// `tmp/` and renamed like any other, its own LRU position, pins and eviction — whose row says which object it belongs
/// to (`slice_of`), which slice it is (`slice_index`) and the whole object's size (`object_size`). Its `etag` is the
/// whole object's validator, so the slices of one version are the rows of one `slice_of` with one `etag` and one
/// `object_size`; committing a slice removes the rows of any other version (``CacheWriter/finish(contentType:kind:etag:lastModified:expiresAt:locked:location:tokens:slice:)``).
extension CacheStore {
    /// The slices stored for the object under `key`, cut with `layout`: the newest version's validator and size and
    /// which slices of that version are here (unexpired). Nil when none is. One indexed read of the index, which sees
    /// the other process's slices too.
    package func sliceSet(of key: CacheKey, layout: SliceLayout) -> SliceSet? {
        let set = layout.setID(of: key)
        let now = Date().timeIntervalSince1970
        let rows = try? index.read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT slice_index, etag, object_size, content_type, last_modified, created_at, expires_at
                        FROM objects WHERE slice_of = ? ORDER BY created_at DESC
                        """), arguments: [set])
        }
        guard let rows, let newest = rows.first else { return nil }
        let validator: String = newest["etag"]
        let objectSize: Int64 = newest["object_size"]
        var present = Set<Int64>()
        for row in rows {
            let expiresAt: Double? = row["expires_at"]
            if let expiresAt, expiresAt <= now { continue }
            if row["etag"] as String == validator, row["object_size"] as Int64 == objectSize { present.insert(row["slice_index"]) }
        }
        let lastModified: Double? = newest["last_modified"]
        return SliceSet(
            validator: validator, objectSize: objectSize, contentType: newest["content_type"],
            lastModified: lastModified.map { Date(timeIntervalSince1970: $0) }, present: present)
    }

    /// Removes every stored slice of the object under `key` (all versions): the origin answered a slice with another
    /// validator or size, so what is stored is an older version. Readers that opened a slice's file keep it.
    /// - Returns: the number of slices removed.
    @discardableResult
    package func removeSlices(of key: CacheKey, layout: SliceLayout) throws -> Int {
        FileSystem.assertMayBlock("removeSlices")
        let set = layout.setID(of: key)
        let hashes = try index.write { db -> [String] in
            let hashes = try String.fetchAll(db, sql: "SELECT key_hash FROM objects WHERE slice_of = ?", arguments: [set])
            try IndexDatabase.delete(db, keyHashes: hashes)
            return hashes
        }
        state.withLock { state in
            for hash in hashes {
                state.entries[hash] = nil
                state.pendingAccess[hash] = nil
            }
            mapChanged()
        }
        for hash in hashes { FileSystem.remove(objectPath(forHash: hash)) }
        return hashes.count
    }

    /// In a commit's transaction: deletes the slices of `slice`'s object stored with another validator or object
    /// size, and returns their key hashes (their files are the caller's to unlink after the commit).
    static func deleteOtherVersions(_ db: Database, of slice: ObjectSlice, validator: String) throws -> [String] {
        let hashes = try String.fetchAll(
            db.cachedStatement(sql: "SELECT key_hash FROM objects WHERE slice_of = ? AND (etag != ? OR object_size != ?)"),
            arguments: [slice.set, validator, slice.objectSize])
        try IndexDatabase.delete(db, keyHashes: hashes)
        return hashes
    }
}
