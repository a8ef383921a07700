import Foundation
import GRDB
import HLSCacheCore

extension CacheStore {
    /// Starts writing a new version of `key`; nothing is visible to lookups until
    /// ``CacheWriter/finish(contentType:kind:etag:lastModified:expiresAt:locked:location:tokens:slice:)`` commits it.
    ///
    /// - Parameter expectedLength: the length the origin announced, if any: checked now against the cap and
    ///   the free-disk cushion (evicting to make room), reserved while writing, and enforced at finish.
    /// - Throws: ``CacheStoreError/cacheFull`` when the object cannot fit even after eviction,
    ///   ``CacheStoreError/io`` when the temp file cannot be created.
    package func makeWriter(for key: CacheKey, expectedLength: Int64?) throws -> CacheWriter {
        FileSystem.assertMayBlock("makeWriter(\(key))")
        if let expectedLength {
            precondition(expectedLength >= 0, "negative expected length")
            try ensureRoom(for: expectedLength)
        } else {
            try ensureRoom(for: 0)
        }
        let hash = Self.keyHash(key)
        let reservation = expectedLength ?? 0
        let counter = state.withLock { state in
            state.reservedBytes += reservation
            state.tempCounter += 1
            return state.tempCounter
        }
        let tempPath = "\(tmpDirectory)/\(hash).\(ProcessInfo.processInfo.processIdentifier).\(counter).tmp"
        do {
            let fd = try FileSystem.createExclusive(tempPath)
            return CacheWriter(
                store: self, key: key, keyHash: hash, expectedLength: expectedLength, tempPath: tempPath,
                fileDescriptor: fd, reservation: reservation)
        } catch {
            releaseReservation(reservation)
            throw error
        }
    }

    func releaseReservation(_ bytes: Int64) {
        guard bytes != 0 else { return }
        state.withLock { $0.reservedBytes -= bytes }
    }

    /// The metadata given to `finish`.
    struct Metadata: Sendable {
        var contentType: String?
        var kind: CacheObjectKind
        var etag: String?
        var lastModified: Date?
        var expiresAt: Date?
        var locked: Bool
        var location: String?
        var tokens: String?
        var slice: ObjectSlice? = nil
    }

    /// Moves a complete, fsynced, closed temp file into `objects/` and records it; the caller owns
    /// `tempPath` until this returns or throws (on throw, nothing is left: neither file nor row).
    func commit(
        tempPath: String,
        key: CacheKey,
        keyHash hash: String,
        size: Int64,
        metadata: Metadata
    ) throws -> CachedObject {
        let folder = "\(objectsDirectory)/\(hash.prefix(2))"
        let finalPath = objectPath(forHash: hash)
        try FileSystem.makeDirectory(folder)

        // A replaced version leaves the index before its file is replaced, so no reader (in this process or
        // the other) ever pairs the old row's size and etag with the new file. It is a miss meanwhile.
        state.withLock { state in
            state.entries[hash] = nil
            state.pendingAccess[hash] = nil
            mapChanged()
        }
        // Usually there is no old version: a read (no lock, no sync in WAL mode) saves a write transaction. A
        // version the other process commits after this read is replaced by the upsert below, as it would be
        // if it came after the delete.
        var wasLocked = false
        var keptForGood = false
        if try index.read({ db in try IndexDatabase.fetch(db, keyHash: hash) }) != nil {
            (wasLocked, keptForGood) = try index.write { db -> (Bool, Bool) in
                guard let old = try IndexDatabase.fetch(db, keyHash: hash) else { return (false, false) }
                try IndexDatabase.delete(db, keyHashes: [hash])
                return (old.locked, old.expiresAt == nil)
            }
        }
        // A version stored for good (a recording's live segment, a prewarm's) is not given a live lifetime by a
        // viewer's copy committed after it: the proxy and a recording may fetch the same segment at once.
        let expiresAt = keptForGood && metadata.kind != .playlist ? nil : metadata.expiresAt

        // The directory is not fsynced: the data already is, and a rename lost in a power cut leaves either a
        // row without a file or a file without a row, both repaired by recovery at the next open. Syncing it
        // doubled the cost of a commit (Benchmarks/prewarm.sh).
        try FileSystem.move(tempPath, to: finalPath)

        let now = Date().timeIntervalSince1970
        let row = ObjectRow(
            keyHash: hash,
            key: key.value,
            size: size,
            contentType: metadata.contentType,
            etag: metadata.etag ?? Self.strongETag(hash: hash, size: size, createdAt: now),
            lastModified: metadata.lastModified?.timeIntervalSince1970,
            createdAt: now,
            lastAccess: now,
            expiresAt: expiresAt?.timeIntervalSince1970,
            locked: metadata.locked || wasLocked,
            kind: metadata.kind.rawValue,
            location: metadata.location,
            tokens: metadata.tokens,
            slice: metadata.slice
        )
        let stale: [String]
        do {
            stale = try index.write { db -> [String] in
                try IndexDatabase.upsert(db, row)
                // A slice of another version of its object: that version's slices go in the same transaction.
                guard let slice = metadata.slice else { return [] }
                return try Self.deleteOtherVersions(db, of: slice, validator: row.etag)
            }
        } catch {
            FileSystem.remove(finalPath)
            throw error
        }
        state.withLock { state in
            state.entries[hash] = row
            for old in stale {
                state.entries[old] = nil
                state.pendingAccess[old] = nil
            }
            mapChanged()
        }
        for old in stale { FileSystem.remove(objectPath(forHash: old)) }
        return row.object(path: finalPath)
    }

    /// A strong validator that changes whenever the bytes can: it names the key, the size and the moment
    /// the version was stored (two versions of one key are never committed in the same microsecond).
    static func strongETag(hash: String, size: Int64, createdAt: Double) -> String {
        let micros = UInt64((createdAt * 1_000_000).rounded())
        return "\"\(hash.prefix(16))-\(String(size, radix: 16))-\(String(micros, radix: 16))\""
    }
}
