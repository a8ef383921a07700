import Foundation
import GRDB
import HLSCacheCore
@testable import HLSCacheStore
import HLSTestSupport
import Testing

@Suite struct CacheStoreEvictionTests {
    @Test func evictsLeastRecentlyUsedFirst() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 300, freeDiskCushion: 0)
        for name in ["a", "b", "c"] {
            try store(bytes(100), as: key(name), in: cache)
        }
        #expect(cache.lookup(key("a")) != nil)  // a is now more recent than b and c
        try store(bytes(100), as: key("d"), in: cache)  // over the cap by 100 at finish: b goes
        #expect(cache.lookup(key("b")) == nil)
        #expect(cache.lookup(key("c")) != nil)  // c is now more recent than a
        try store(bytes(150), as: key("e"), in: cache)  // needs 150: a and d (oldest) go
        #expect(cache.lookup(key("a")) == nil)
        #expect(cache.lookup(key("d")) == nil)
        #expect(cache.lookup(key("c")) != nil && cache.lookup(key("e")) != nil)
        #expect(try usage(cache) == [250, 2])
        #expect(dir.objectFiles().count == 2)
    }

    @Test func lockedAndPinnedObjectsSurvive() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 300, freeDiskCushion: 0)
        try store(bytes(100), as: key("locked"), in: cache, locked: true)
        try store(bytes(100), as: key("pinned"), in: cache)
        try store(bytes(100), as: key("plain"), in: cache)
        let (_, pin) = try #require(cache.lookupAndPin(key("pinned")))
        try store(bytes(100), as: key("new"), in: cache)
        #expect(cache.lookup(key("plain")) == nil)
        #expect(cache.lookup(key("locked")) != nil && cache.lookup(key("pinned")) != nil)

        // Only `new` is evictable, and 200 bytes are needed: refused, and nothing was evicted for it.
        #expect(throws: CacheStoreError.cacheFull) { try cache.makeWriter(for: key("big"), expectedLength: 200) }
        #expect(dir.files(in: "tmp").isEmpty)
        #expect(cache.lookup(key("new")) != nil)

        pin.unpin()
        try cache.setLocked([key("locked")], false)
        let big = try store(bytes(200), as: key("big"), in: cache)
        #expect(FileManager.default.fileExists(atPath: big.path))
        #expect(try usage(cache)[0] <= 300)
        #expect(cache.lookup(key("big")) != nil)
    }

    @Test func accessTimesReachTheIndexForTheOtherChildProcess() throws {
        let dir = try TemporaryDirectory()
        let server = try CacheStore.open(directory: dir.path, maxBytes: 200, freeDiskCushion: 0)
        try store(bytes(100), as: key("a"), in: server)
        try store(bytes(100), as: key("b"), in: server)
        #expect(server.lookup(key("a")) != nil)  // recorded in memory only, until a batch is flushed
        server.flushAccessTimes()
        // The fetch process evicts by the index's LRU order, which now includes the server's hit on a.
        let fetch = try CacheStore.open(directory: dir.path, maxBytes: 200, freeDiskCushion: 0)
        try store(bytes(100), as: key("c"), in: fetch)
        #expect(fetch.lookup(key("b")) == nil)
        #expect(fetch.lookup(key("a")) != nil)
    }

    @Test func lockedFlagSurvivesReplacement() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1000, freeDiskCushion: 0)
        try store(bytes(10), as: key("k"), in: cache, locked: true)
        let replaced = try store(bytes(20), as: key("k"), in: cache)
        #expect(replaced.locked)
    }

    @Test func cacheFullWhenAnObjectCannotFit() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1000, freeDiskCushion: 0)
        try store(bytes(500), as: key("keep"), in: cache)
        #expect(throws: CacheStoreError.cacheFull) { try cache.makeWriter(for: key("huge"), expectedLength: 1001) }

        // Without an announced length the cap is enforced while writing; nothing is left behind.
        let unknown = try cache.makeWriter(for: key("huge"), expectedLength: nil)
        try unknown.write(bytes(1000))
        #expect(throws: CacheStoreError.cacheFull) { try unknown.write(bytes(1)) }
        #expect(cache.lookup(key("huge")) == nil && dir.files(in: "tmp").isEmpty)
        #expect(cache.lookup(key("keep")) != nil)

        // A cushion larger than the disk's free space: nothing fits, whatever is evicted.
        let tight = try CacheStore.open(directory: dir.path + "/tight", maxBytes: 1 << 40, freeDiskCushion: 1 << 60)
        #expect(throws: CacheStoreError.cacheFull) { try tight.makeWriter(for: key("x"), expectedLength: 1) }
        #expect(throws: CacheStoreError.cacheFull) { try tight.makeWriter(for: key("x"), expectedLength: nil) }
    }
}

@Suite struct EvictionQueryPlanTests {
    /// A full cache evicts on every write: the candidates must come from index scans that stop early, never from a
    /// sort of the whole table (which made a prewarm into a full 50,000-object cache take 7–21 s).
    @Test func evictionCandidatesAreReadInIndexOrderWithoutASort() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        defer { cache.close() }
        let plans = try cache.index.read { db in
            try [IndexDatabase.expiredCandidatesSQL, IndexDatabase.leastRecentlyUsedCandidatesSQL].map { sql in
                let arguments: StatementArguments = sql.contains("?") ? [0.0] : []
                return try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments)
                    .map { $0["detail"] as String }.joined(separator: "; ")
            }
        }
        #expect(plans.count == 2)
        for plan in plans {
            #expect(plan.contains("USING INDEX"), "\(plan)")
            #expect(!plan.contains("TEMP B-TREE"), "\(plan)")
        }
    }
}
