import Foundation
import Synchronization

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
        currentCheck(object, and: other) != nil
    }

    /// ``touchIfUnchanged(_:and:)``, telling how long the answer holds: until ``generation`` moves (the map changed)
    /// or the earlier expiry of the two passes. Nil: not both unchanged.
    package func currentCheck(_ object: CachedObject, and other: CachedObject? = nil) -> CurrentCheck? {
        let now = Date().timeIntervalSince1970
        let found = state.withLock { state -> (CurrentCheck, Bool, Bool)? in
            guard let index = state.entries.index(forKey: object.keyHash) else { return nil }
            // Read in place, through the row's modify accessor: a copy of the row (`let row = …`, or each
            // `values[index].field` read) retained and released each of its strings per hit.
            guard Self.touch(&state.entries.values[index], ifItIs: object, at: now) else { return nil }
            var expiresAt = state.entries.values[index].expiresAt
            // Mutations move the generation under this lock: read here, it is the one these rows belong to.
            let generation = mapGeneration.load(ordering: .relaxed)
            guard let other else {
                let (flushNow, schedule) = Self.recordAccess(&state, hash: object.keyHash, at: now)
                return (CurrentCheck(generation: generation, expiresAt: expiresAt), flushNow, schedule)
            }
            // (When the other changed, the first row's time moved in memory and is not recorded: the ordinary path
            // that answers instead looks both up again.)
            guard let otherIndex = state.entries.index(forKey: other.keyHash),
                Self.touch(&state.entries.values[otherIndex], ifItIs: other, at: now)
            else { return nil }
            if let otherExpiry = state.entries.values[otherIndex].expiresAt { expiresAt = min(expiresAt ?? otherExpiry, otherExpiry) }
            let first = Self.recordAccess(&state, hash: object.keyHash, at: now)
            let second = Self.recordAccess(&state, hash: other.keyHash, at: now)
            return (CurrentCheck(generation: generation, expiresAt: expiresAt), first.0 || second.0, first.1 || second.1)
        }
        guard let (check, flushNow, schedule) = found else { return nil }
        scheduleAccessFlush(now: flushNow, later: schedule)
        return check
    }

    /// The map's generation now (``mapGeneration``): equal to a ``CurrentCheck``'s, nothing in the map changed since
    /// that check.
    package var generation: UInt64 { mapGeneration.load(ordering: .acquiring) }

    /// Moves ``generation``; called under the state lock with each change of the map.
    func mapChanged() {
        mapGeneration.wrappingAdd(1, ordering: .releasing)
    }

    /// Records an access at `now` in `row` if it is `object`'s version and not expired.
    static func touch(_ row: inout ObjectRow, ifItIs object: CachedObject, at now: Double) -> Bool {
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

/// What ``CacheStore/currentCheck(_:and:)`` found: objects current in the map at ``generation``, and the earliest
/// time (seconds since 1970) one of them expires, if any.
package struct CurrentCheck: Sendable, Equatable {
    package let generation: UInt64
    package let expiresAt: Double?

    /// Whether the check still holds: the map has not changed since, and nothing checked has expired at `now`.
    package func holds(in store: CacheStore, now: @autoclosure () -> Double) -> Bool {
        guard store.generation == generation else { return false }
        guard let expiresAt else { return true }
        return now() < expiresAt
    }
}
