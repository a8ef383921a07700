import Foundation

extension CacheStore {
    /// Records an access to `object` like a lookup, if it is still what is stored under its key (same entity tag
    /// and size, not expired), without pinning it: for a hit answered from a copy in memory, where no file is read
    /// that eviction could take away. False when the object changed or went away from this process's map.
    package func touchIfUnchanged(_ object: CachedObject) -> Bool {
        let hash = object.keyHash
        let now = Date().timeIntervalSince1970
        let flush = state.withLock { state -> (Bool, Bool)? in
            guard let index = state.entries.index(forKey: hash) else { return nil }
            // Read in place: a copy of the row (`let row = …`) retained and released each of its strings per hit.
            guard state.entries.values[index].etag == object.etag, state.entries.values[index].size == object.size,
                !state.entries.values[index].isExpired(at: now)
            else { return nil }
            state.entries.values[index].lastAccess = now
            return Self.recordAccess(&state, hash: hash, at: now)
        }
        guard let (flushNow, schedule) = flush else { return false }
        scheduleAccessFlush(now: flushNow, later: schedule)
        return true
    }

    /// Whether `object` is still what this process's map holds for its key (same entity tag and size, not expired);
    /// records nothing.
    package func isCurrent(_ object: CachedObject) -> Bool {
        let now = Date().timeIntervalSince1970
        return state.withLock { state in
            guard let row = state.entries[object.keyHash] else { return false }
            return row.etag == object.etag && row.size == object.size && !row.isExpired(at: now)
        }
    }
}
