import Foundation
import GRDB
import HLSCacheCore

extension CacheStore {
    /// Evicts objects until at least `bytes` are freed or nothing evictable is left: expired objects first,
    /// then least recently used. Locked objects (index flag) and objects pinned in this process are skipped.
    ///
    /// - Returns: the bytes freed.
    @discardableResult
    package func evict(bytes: Int64) throws -> Int64 {
        try evict(allOrNothing: false) { _ in bytes }.freed
    }

    /// Evicts what `wanted` asks for, given the bytes the index holds *inside the eviction's write transaction*: a
    /// decision taken on an earlier reading would count an eviction that committed meanwhile (another writer's, waited
    /// for on the write lock) and evict again what no longer needs to go — an item's own first segments, mid-prewarm.
    /// With `allOrNothing`, evicts nothing (and frees 0) unless all of it can be freed: a write that will be refused
    /// anyway must not empty the cache on its way out.
    /// - Returns: the bytes freed and the bytes that were wanted (0 or less: nothing was needed).
    func evict(allOrNothing: Bool, wanted: (_ usedBytes: Int64) -> Int64) throws -> (freed: Int64, wanted: Int64) {
        FileSystem.assertMayBlock("evict")
        // This process's recent hits must count in the LRU order.
        flushAccessTimes()
        // Counted from before its rows go until its files are unlinked: closing meanwhile keeps the session file
        // (``close()``), as the files of rows already deleted would otherwise be left behind for good.
        state.withLock { $0.unlinking += 1 }
        defer { state.withLock { $0.unlinking -= 1 } }
        let now = Date().timeIntervalSince1970
        var victims: [String] = []
        var victimKeys: [String] = []
        var hidden: [String: ObjectRow] = [:]
        var bytes: Int64 = 0
        let freed = try index.write { db -> Int64 in
            victims.removeAll()
            victimKeys.removeAll()
            hidden.removeAll()
            bytes = wanted(try IndexDatabase.usage(db).bytes)
            guard bytes > 0 else { return 0 }
            var freed: Int64 = 0
            var seen = Set<String>()
            for cursor in try IndexDatabase.evictionCandidates(db, now: now) {
                while freed < bytes, let row = try cursor.next() {
                    let hash: String = row["key_hash"]
                    guard seen.insert(hash).inserted else { continue }
                    // Checking the pin and hiding the entry in one step means no lookupAndPin can slip between.
                    let evictable = state.withLock { state -> Bool in
                        guard state.pins[hash] == nil else { return false }
                        hidden[hash] = state.entries.removeValue(forKey: hash)
                        state.pendingAccess[hash] = nil
                        mapChanged()
                        return true
                    }
                    if evictable {
                        victims.append(hash)
                        victimKeys.append(row["key"])
                        freed += row["size"] as Int64
                    }
                }
            }
            if allOrNothing && freed < bytes {
                victims.removeAll()
                victimKeys.removeAll()
                return 0
            }
            try IndexDatabase.delete(db, keyHashes: victims)
            return freed
        }
        if victims.isEmpty && !hidden.isEmpty {
            state.withLock { state in
                for (hash, row) in hidden where state.entries[hash] == nil { state.entries[hash] = row }
                mapChanged()
            }
        }
        if !victims.isEmpty, let hook = state.withLock({ $0.lifecycle.beforeUnlinkHook }) { hook() }
        // Unlink only after the rows are gone for good: a file without a row is harmless, the reverse is not.
        for hash in victims { FileSystem.remove(objectPath(forHash: hash)) }
        if !victimKeys.isEmpty {
            let keys = victimKeys.map(CacheKey.init(storedValue:))
            for observer in state.withLock({ $0.lifecycle.evictionObservers }) { observer(keys) }
        }
        return (freed, bytes)
    }

    /// Evicts down to the cap if the index (both processes' objects) plus open reservations exceed it.
    func evictIfOverCap() throws {
        let (bytes, _) = try usage()
        guard bytes + state.withLock({ $0.reservedBytes }) > maxBytes else { return }
        _ = try evict(allOrNothing: false) { used in used + state.withLock { $0.reservedBytes } - maxBytes }
    }

    /// Makes room for `needed` more bytes under the cap and above the free-disk cushion, evicting if needed.
    ///
    /// - Throws: ``CacheStoreError/cacheFull`` when even eviction cannot make room.
    func ensureRoom(for needed: Int64) throws {
        guard needed <= maxBytes else {
            throw CacheStoreError.cacheFull.with("\(needed) bytes exceed the cache size cap of \(maxBytes)")
        }
        let (bytes, _) = try usage()
        if bytes + state.withLock({ $0.reservedBytes }) + needed > maxBytes {
            let (freed, overCap) = try evict(allOrNothing: true) { used in used + state.withLock { $0.reservedBytes } + needed - maxBytes }
            guard freed >= overCap else {
                throw CacheStoreError.cacheFull.with(
                    "\(needed) bytes do not fit under the cap of \(maxBytes): the rest is locked, pinned or being written")
            }
        }
        guard let available = FileSystem.availableBytes(directory) else { return }
        let shortOnDisk = needed + freeDiskCushion - available
        if shortOnDisk > 0 {
            let freed = try evict(allOrNothing: true) { _ in shortOnDisk }.freed
            guard freed >= shortOnDisk else {
                let free = FileSystem.availableBytes(directory) ?? available
                let kept = freeDiskCushion > 0 ? ", of which \(ByteSize(bytes: freeDiskCushion)) are kept free (cache.freeDiskCushion)" : ""
                throw CacheStoreError.cacheFull.with(
                    "\(ByteSize(bytes: needed)) do not fit on the cache's file system: \(ByteSize(bytes: max(free, 0))) free\(kept)")
            }
        }
    }
}
