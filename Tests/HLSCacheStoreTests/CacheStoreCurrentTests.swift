import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import Testing

/// ``CacheStore/touchIfUnchanged(_:)`` and ``CacheStore/isCurrent(_:)``: what the proxy's memory tier asks before it
/// answers from a copy of an object.
@Suite struct CacheStoreCurrentTests {
    @Test func onlyTheStoredUnexpiredVersionIsCurrent() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let first = try store(bytes(100), as: key("a.ts"), in: cache)
        #expect(cache.isCurrent(first) && cache.touchIfUnchanged(first))
        // A new version: the old one is no longer current, the new one is.
        let second = try store(bytes(100, seed: 7), as: key("a.ts"), in: cache)
        #expect(!cache.isCurrent(first) && !cache.touchIfUnchanged(first))
        #expect(cache.isCurrent(second) && cache.touchIfUnchanged(second))
        // Removed.
        #expect(try cache.remove(key("a.ts")))
        #expect(!cache.isCurrent(second) && !cache.touchIfUnchanged(second))
        // Expired.
        let expiring = try store(bytes(10), as: key("e.ts"), in: cache, expiresAt: Date().addingTimeInterval(-1))
        #expect(!cache.isCurrent(expiring) && !cache.touchIfUnchanged(expiring))
        // Evicted.
        let evicted = try store(bytes(10), as: key("v.ts"), in: cache)
        #expect(try cache.evict(bytes: 1 << 30) > 0)
        #expect(!cache.isCurrent(evicted) && !cache.touchIfUnchanged(evicted))
        // Nothing touched pins: everything could be evicted.
        #expect(try usage(cache) == [0, 0])
        cache.close()
    }

    /// A touch counts for the LRU order like a lookup: the touched object is evicted last.
    @Test func aTouchCountsAsAnAccess() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let old = try store(bytes(100), as: key("old.ts"), in: cache)
        Thread.sleep(forTimeInterval: 0.01)
        _ = try store(bytes(100), as: key("new.ts"), in: cache)
        Thread.sleep(forTimeInterval: 0.01)
        #expect(cache.touchIfUnchanged(old))
        #expect(try cache.evict(bytes: 100) == 100)
        #expect(cache.lookup(key("old.ts")) != nil)
        #expect(cache.lookup(key("new.ts")) == nil)
        cache.close()
    }

    /// Two objects checked together (a playlist's raw copy and its rewritten copy): true only while both are the
    /// stored versions, and then both accesses count for the LRU order.
    @Test func twoObjectsAreTouchedOnlyTogether() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let raw = try store(bytes(100), as: key("raw.m3u8"), in: cache)
        let copy = try store(bytes(100, seed: 3), as: key("copy.m3u8"), in: cache)
        Thread.sleep(forTimeInterval: 0.01)
        _ = try store(bytes(100, seed: 5), as: key("new.ts"), in: cache)
        Thread.sleep(forTimeInterval: 0.01)
        #expect(cache.touchIfUnchanged(copy, and: raw))
        // Both were touched after new.ts was stored: it goes first, then the two.
        #expect(try cache.evict(bytes: 100) == 100)
        #expect(cache.lookup(key("new.ts")) == nil)
        #expect(cache.lookup(key("raw.m3u8")) != nil && cache.lookup(key("copy.m3u8")) != nil)
        // Either one changed or gone: false, whichever it is.
        let newRaw = try store(bytes(100, seed: 9), as: key("raw.m3u8"), in: cache)
        #expect(!cache.touchIfUnchanged(copy, and: raw))
        #expect(!cache.touchIfUnchanged(raw, and: copy))
        #expect(cache.touchIfUnchanged(copy, and: newRaw))
        #expect(try cache.remove(key("copy.m3u8")))
        #expect(!cache.touchIfUnchanged(copy, and: newRaw))
        #expect(!cache.touchIfUnchanged(newRaw, and: copy))
        #expect(cache.touchIfUnchanged(newRaw, and: nil))
        cache.close()
    }

    /// ``CacheStore/currentCheck(_:and:)``: holds while the map has not changed (its generation) and nothing checked
    /// has expired — every kind of change to the map moves the generation, an access does not.
    @Test func aCheckHoldsUntilTheMapChangesOrAnObjectExpires() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let expiry = Date().addingTimeInterval(3600)
        let raw = try store(bytes(100), as: key("raw.m3u8"), in: cache, expiresAt: expiry.addingTimeInterval(60))
        let copy = try store(bytes(100, seed: 3), as: key("copy.m3u8"), in: cache, expiresAt: expiry)
        let check = try #require(cache.currentCheck(copy, and: raw))
        #expect(check.expiresAt == expiry.timeIntervalSince1970, "the earlier expiry of the two")
        #expect(check.holds(in: cache, now: Date().timeIntervalSince1970))
        #expect(check.holds(in: cache, now: expiry.timeIntervalSince1970 - 0.001))
        #expect(!check.holds(in: cache, now: expiry.timeIntervalSince1970))
        // Accesses change nothing.
        _ = cache.lookup(key("raw.m3u8"))
        #expect(cache.touchIfUnchanged(copy, and: raw))
        #expect(cache.currentCheck(copy, and: raw) == check)
        #expect(check.holds(in: cache, now: Date().timeIntervalSince1970))

        // Each change moves it (on an object not checked too: one comparison tells nothing changed at all).
        let other = try store(bytes(10), as: key("other.ts"), in: cache)
        var last = check.generation
        func moved(_ what: String) {
            #expect(cache.generation != last, "\(what) did not move the generation")
            #expect(!check.holds(in: cache, now: Date().timeIntervalSince1970))
            last = cache.generation
        }
        moved("a write")
        try cache.setLocked([key("other.ts")], true)
        moved("a lock")
        try cache.clearExpiry([key("raw.m3u8")])
        moved("an expiry cleared")
        try cache.extendExpiry([key("copy.m3u8")], to: expiry.addingTimeInterval(600), minimumStep: 1)
        moved("an expiry extended")
        cache.forget(other)
        moved("an object forgotten")
        #expect(cache.lookup(key("other.ts")) != nil)
        moved("an object read back from the index")
        #expect(try cache.remove(key("other.ts")))
        moved("a removal")
        try cache.setLocked([key("raw.m3u8"), key("copy.m3u8")], false)
        last = cache.generation
        #expect(try cache.evict(bytes: 1 << 30) > 0)
        moved("an eviction")
        cache.close()
    }
}
