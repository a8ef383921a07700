import Foundation
import GRDB
import HLSCacheCore

extension CacheStore {
    /// Pushes the expiry of the objects `keys` out to `date`: a live segment stays served while a reading of its live
    /// playlist still lists it (and its lifetime after that), not only for a lifetime counted from when it was stored.
    /// A segment stored from a short window (a channel that just started) or early in the window would otherwise
    /// expire while still listed, and a recording or late viewer reading that window would fetch it again.
    ///
    /// Only objects this process knows, that have an expiry, are not expired yet, and would gain at least
    /// `minimumStep` seconds are written (one transaction): a playlist read every half target duration rewrites each
    /// listed row about once per `minimumStep`. Objects kept for good (no expiry) stay so. Returns how many changed.
    @discardableResult
    package func extendExpiry(_ keys: [CacheKey], to date: Date, minimumStep: TimeInterval) throws -> Int {
        let now = Date().timeIntervalSince1970
        let until = date.timeIntervalSince1970
        let hashes = keys.map { cachedKeyHash($0) }
        let due = state.withLock { state in
            hashes.filter { hash in
                guard let row = state.entries[hash], let expiresAt = row.expiresAt else { return false }
                return expiresAt > now && expiresAt + minimumStep <= until
            }
        }
        guard !due.isEmpty else { return 0 }
        try index.write { db in
            for hash in due {
                try db.execute(
                    sql: "UPDATE objects SET expires_at = ? WHERE key_hash = ? AND expires_at IS NOT NULL AND expires_at < ?",
                    arguments: [until, hash, until])
            }
        }
        state.withLock { state in
            for hash in due where (state.entries[hash]?.expiresAt).map({ $0 < until }) == true {
                state.entries[hash]?.expiresAt = until
            }
            mapChanged()
        }
        return due.count
    }

    /// Whether a complete, unexpired object is stored under `key`, as this process knows: no access is recorded (a
    /// check, not a use, so it does not keep the object from eviction).
    package func holds(_ key: CacheKey) -> Bool {
        let hash = cachedKeyHash(key)
        let now = Date().timeIntervalSince1970
        return state.withLock { state in state.entries[hash].map { !$0.isExpired(at: now) } ?? false }
    }

    /// When the object under `key` that this process knows expires, or expired (it may be past): `nil` when none is
    /// known or it is kept for good. For the logs: why a live segment was asked of the origin again.
    package func knownExpiry(of key: CacheKey) -> Date? {
        let hash = cachedKeyHash(key)
        return state.withLock { state in state.entries[hash]?.expiresAt }.map { Date(timeIntervalSince1970: $0) }
    }
}
