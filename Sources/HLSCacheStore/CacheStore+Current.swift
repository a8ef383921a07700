import Foundation

extension CacheStore {
    /// Records an access to `object` like a lookup, if it is still what is stored under its key (same entity tag
    /// and size, not expired), without pinning it: for a hit answered from a copy in memory, where no file is read
    /// that eviction could take away. False when the object changed or went away from this process's map.
    package func touchIfUnchanged(_ object: CachedObject) -> Bool {
        touchIfUnchanged(object, and: nil)
    }

    /// ``touchIfUnchanged(_:)`` for two objects under one lock and one clock reading (a playlist's raw copy and the
    /// rewritten copy a replayed hit sends): true when both are unchanged, and then both accesses are recorded.
    package func touchIfUnchanged(_ object: CachedObject, and other: CachedObject?) -> Bool {
        let now = Date().timeIntervalSince1970
        let flush = state.withLock { state -> (Bool, Bool)? in
            guard let index = state.entries.index(forKey: object.keyHash) else { return nil }
            // Read in place, through the row's modify accessor: a copy of the row (`let row = …`, or each
            // `values[index].field` read) retained and released each of its strings per hit.
            guard Self.touch(&state.entries.values[index], ifItIs: object, at: now) else { return nil }
            guard let other else { return Self.recordAccess(&state, hash: object.keyHash, at: now) }
            // (When the other changed, the first row's time moved in memory and is not recorded: the ordinary path
            // that answers instead looks both up again.)
            guard let otherIndex = state.entries.index(forKey: other.keyHash),
                Self.touch(&state.entries.values[otherIndex], ifItIs: other, at: now)
            else { return nil }
            let first = Self.recordAccess(&state, hash: object.keyHash, at: now)
            let second = Self.recordAccess(&state, hash: other.keyHash, at: now)
            return (first.0 || second.0, first.1 || second.1)
        }
        guard let (flushNow, schedule) = flush else { return false }
        scheduleAccessFlush(now: flushNow, later: schedule)
        return true
    }

    /// Records an access at `now` in `row` if it is `object`'s version and not expired.
    private static func touch(_ row: inout ObjectRow, ifItIs object: CachedObject, at now: Double) -> Bool {
        guard row.etag == object.etag, row.size == object.size, !row.isExpired(at: now) else { return false }
        row.lastAccess = now
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
