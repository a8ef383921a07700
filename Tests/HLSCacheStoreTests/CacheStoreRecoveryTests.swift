import Foundation
import GRDB
import HLSCacheCore
import HLSCrypto
@testable import HLSCacheStore
import HLSTestSupport
import Testing

@Suite struct CacheStoreRecoveryTests {
    /// An index damaged between runs (after a clean close, so the quick open reads too little of it to notice): the
    /// lookups it cannot answer are misses, and `/readyz` says the index is damaged and what to do, instead of ready.
    @Test func aDamagedIndexMakesTheStoreUnready() throws {
        let dir = try TemporaryDirectory()
        let names = (0..<400).map { "segment-\($0)-" + String(repeating: "x", count: 120) + ".ts" }
        do {
            let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 30, freeDiskCushion: 0)
            for name in names { _ = try store(bytes(10), as: key(name), in: cache) }
            #expect(cache.readiness() == .ready)
            cache.close()
        }
        let index = dir.path + "/index.sqlite"
        try DatabaseQueue(path: index).writeWithoutTransaction { try $0.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        // Garbage over the second half of the file: the objects' pages, not the schema at its start.
        let handle = try #require(FileHandle(forUpdatingAtPath: index))
        let size = try handle.seekToEnd()
        try #require(size > 64 << 10)
        try handle.seek(toOffset: size / 2)
        handle.write(Data(repeating: 0xA5, count: Int(size - size / 2)))
        try handle.close()

        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        defer { cache.close() }
        #expect(!cache.recovery.full)
        let found = names.filter { cache.lookup(key($0)) != nil }.count
        #expect(found < names.count, "some lookups met the damage")
        guard case .unavailable(let reason) = cache.readiness() else {
            Issue.record("a damaged index reads as \(cache.readiness())")
            return
        }
        #expect(reason.contains("is damaged") && reason.contains("index.sqlite-wal"), "\(reason)")
    }

    @Test func recoveryRepairsFilesAndIndexAfterAProcessThatDidNotClose() throws {
        let dir = try TemporaryDirectory()
        var paths: [String: String] = [:]
        do {
            let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
            #expect(cache.recovery.exclusive && cache.recovery.full)  // a new directory: nothing to check, but checked
            for name in ["ok.ts", "missing.ts", "truncated.ts"] {
                paths[name] = try store(bytes(100), as: key(name), in: cache).path
            }
            // No close(): what a killed process leaves — its session file, and its flock released with the descriptor.
        }
        #expect(dir.files(in: "sessions").count == 1)
        // A crashed writer's temp file (dead pid), a row whose file is gone, a truncated file, an orphan file.
        _ = FileManager.default.createFile(
            atPath: dir.path + "/tmp/\(String(repeating: "a", count: 64)).999999999.1.tmp", contents: Data([1, 2]))
        _ = FileManager.default.createFile(atPath: dir.path + "/tmp/junk", contents: Data([1]))
        try FileManager.default.removeItem(atPath: paths["missing.ts"]!)
        try Data(bytes(50)).write(to: URL(fileURLWithPath: paths["truncated.ts"]!))
        try FileManager.default.createDirectory(atPath: dir.path + "/objects/ff", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir.path + "/objects/ff/" + String(repeating: "f", count: 62), contents: Data([7]))

        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        #expect(cache.recovery.exclusive && cache.recovery.full)
        #expect(cache.recovery.tempFilesRemoved == 2)
        #expect(cache.recovery.rowsDropped == 2)
        #expect(cache.recovery.orphanFilesRemoved == 1)
        #expect(cache.recovery.objectCount == 1)
        #expect(cache.lookup(key("ok.ts")) != nil)
        #expect(cache.lookup(key("missing.ts")) == nil)
        #expect(cache.lookup(key("truncated.ts")) == nil)
        #expect(!FileManager.default.fileExists(atPath: paths["truncated.ts"]!))
        #expect(dir.files(in: "tmp").isEmpty)
        #expect(dir.objectFiles().count == 1)
        #expect(try usage(cache) == [100, 1])
        #expect(!cache.recovery.totalsRecounted)  // the triggers kept them right through the deletes
        #expect(dir.files(in: "sessions").count == 1)  // the dead one is gone, this open's is there
        cache.close()
        #expect(dir.files(in: "sessions").isEmpty)
    }

    /// A store closed while an eviction still unlinks the files of rows it already deleted (a SIGTERM during a large
    /// eviction) keeps its session file, so the next open alone runs the full pass; otherwise the files left behind
    /// would be orphans for good: uncounted, outside the cap, never checked again.
    @Test func closingDuringAnEvictionsUnlinksLeavesTheFullPassToTheNextOpen() async throws {
        // Seconds of file creation and waiting: off Swift's cooperative pool, which the other tests need.
        try await onOwnThread { try Self.closeDuringEviction() }
    }

    private static func closeDuringEviction() throws {
        let dir = try TemporaryDirectory()
        try CacheStore.open(directory: dir.path, maxBytes: 1 << 40, freeDiskCushion: 0).close()  // the schema
        let count = 300  // the window is held open by a barrier: no need for many files to make it last
        let queue = try DatabaseQueue(path: dir.path + "/index.sqlite")
        for prefix in 0..<256 {
            try FileManager.default.createDirectory(
                atPath: dir.path + "/objects/" + String(format: "%02x", prefix), withIntermediateDirectories: true)
        }
        try queue.write { db in
            for index in 0..<count {
                let key = "https://cdn.example.invalid/prefill/\(index).ts"
                let hash = SHA256.hex(key)
                let descriptor = open(dir.path + "/objects/" + hash.prefix(2) + "/" + hash.dropFirst(2), O_CREAT | O_WRONLY, 0o644)
                #expect(descriptor >= 0 && write(descriptor, "x", 1) == 1)
                close(descriptor)
                try db.execute(
                    sql:
                        "INSERT INTO objects (key_hash, key, size, content_type, etag, created_at, last_access, locked, kind) VALUES (?, ?, 1, 'video/mp2t', ?, ?, ?, 0, 'segment')",
                    arguments: [hash, key, "\"\(hash.prefix(16))\"", Double(index), Double(index)])
            }
        }
        try queue.close()

        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 40, freeDiskCushion: 0)
        #expect(try cache.usage().count == count)
        // The eviction is held between deleting its rows and unlinking their files while the store is closed: the
        // window is reached every run, whatever the machine's speed.
        let rowsGone = DispatchSemaphore(value: 0)
        let closedNow = DispatchSemaphore(value: 0)
        cache.beforeUnlinking {
            rowsGone.signal()
            _ = closedNow.wait(timeout: .now() + 300)
        }
        let evicted = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? cache.evict(bytes: Int64(count))
            evicted.signal()
        }
        #expect(rowsGone.wait(timeout: .now() + 300) == .success, "the eviction reached its unlinks")
        #expect(try cache.usage().count == 0)
        cache.close()
        #expect(dir.objectFiles().count == count, "closed before any file was unlinked")
        #expect(!dir.files(in: "sessions").isEmpty, "files without rows, and no session file to have them removed")
        closedNow.signal()
        evicted.wait()

        // Whatever this process had time to do, the next open leaves no file without a row.
        let reopened = try CacheStore.open(directory: dir.path, maxBytes: 1 << 40, freeDiskCushion: 0)
        defer { reopened.close() }
        #expect(dir.objectFiles().isEmpty)
    }

    @Test func aCleanlyClosedCacheOpensWithoutTheFullPassAndStillNeverServesADamagedFile() throws {
        let dir = try TemporaryDirectory()
        var paths: [String: String] = [:]
        do {
            let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
            for name in ["ok.ts", "missing.ts", "truncated.ts"] {
                paths[name] = try store(bytes(100), as: key(name), in: cache).path
            }
            cache.close()
            cache.close()  // idempotent
        }
        #expect(dir.files(in: "sessions").isEmpty)
        // Damage by hand between two runs: not looked for at open any more...
        try FileManager.default.removeItem(atPath: paths["missing.ts"]!)
        try Data(bytes(50)).write(to: URL(fileURLWithPath: paths["truncated.ts"]!))
        _ = FileManager.default.createFile(
            atPath: dir.path + "/tmp/\(String(repeating: "b", count: 64)).999999999.1.tmp", contents: Data([1]))

        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        #expect(cache.recovery.exclusive && !cache.recovery.full)
        #expect(cache.recovery.rowsDropped == 0 && cache.recovery.orphanFilesRemoved == 0)
        #expect(cache.recovery.tempFilesRemoved == 1)  // temp files are cheap to sweep: always
        #expect(cache.recovery.objectCount == 3)  // from the totals row
        // ...but never served: the first lookup in a process checks the file's size.
        #expect(cache.lookup(key("ok.ts")) != nil)
        #expect(cache.lookup(key("missing.ts")) == nil)
        #expect(cache.lookup(key("truncated.ts")) == nil)
        // A refetch replaces the damaged version; the totals follow.
        try store(bytes(70), as: key("truncated.ts"), in: cache)
        #expect(contents(try #require(cache.lookup(key("truncated.ts"))).path) == bytes(70))
        #expect(try usage(cache) == [270, 3])
        cache.close()

        // The index deleted to start over: its files must not stay behind unaccounted.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: dir.path + "/index.sqlite" + suffix) }
        let fresh = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        #expect(fresh.recovery.full && fresh.recovery.orphanFilesRemoved == 2)
        #expect(dir.objectFiles().isEmpty)
        #expect(try usage(fresh) == [0, 0])
        fresh.close()
    }

    @Test func usageTotalsStayEqualToTheRowsThroughEveryKindOfChange() async throws {
        try await onOwnThread { try usageTotalsStayEqualToTheRowsThroughEveryKindOfChangeBlocking() }
    }

    /// Long and blocking: runs on a thread of its own (``onOwnThread(_:)``).
    func usageTotalsStayEqualToTheRowsThroughEveryKindOfChangeBlocking() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 5_000, freeDiskCushion: 0)
        var generator = SystemRandomNumberGenerator()
        var names: [String] = []
        for step in 0..<300 {
            let name = "o\(Int.random(in: 0..<40, using: &generator)).ts"
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<5:  // new object or a replaced version, maybe locked; evicts when over the cap
                let size = Int.random(in: 1..<400, using: &generator)
                _ = try? store(
                    bytes(size, seed: UInt8(truncatingIfNeeded: step)), as: key(name), in: cache,
                    locked: Bool.random(using: &generator) && step % 3 == 0)
                names.append(name)
            case 5, 6:
                try cache.remove(key(name))
            case 7:
                try cache.setLocked(names.suffix(5).map(key), Bool.random(using: &generator))
            case 8:
                try cache.evict(bytes: Int64.random(in: 1..<800, using: &generator))
            default:
                try? cache.makeWriter(for: key(name), expectedLength: 10).abort()
            }
            let summed = try cache.index.read(IndexDatabase.summedTotals)
            let (bytes, count) = try cache.usage()
            let locked = try cache.lockedBytes()
            #expect(bytes == summed.bytes && count == summed.count && locked == summed.lockedBytes, "after step \(step)")
            #expect(
                bytes
                    == Int64(
                        dir.objectFiles().compactMap {
                            try? FileManager.default.attributesOfItem(atPath: dir.path + "/objects/" + $0)[.size] as? Int
                        }.reduce(0, +)))
        }
        cache.close()
    }

    @Test func aCacheFromBeforeTheTotalsGetsThemFromItsRows() throws {
        let dir = try TemporaryDirectory()
        do {
            let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
            try store(bytes(100), as: key("a.ts"), in: cache, locked: true)
            try store(bytes(30), as: key("b.ts"), in: cache)
            // Back to the v1 schema, as an older hlscache left it: no totals, no triggers, no session records.
            try cache.index.write { db in
                try db.execute(
                    sql: """
                        DROP TRIGGER object_totals_insert; DROP TRIGGER object_totals_delete; DROP TRIGGER object_totals_update;
                        DROP TABLE object_totals; DELETE FROM grdb_migrations WHERE identifier = 'v2-totals'
                        """)
            }
            cache.close()
        }
        try FileManager.default.removeItem(atPath: dir.path + "/sessions")
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        #expect(cache.recovery.full)  // no session records: checked once
        #expect(try usage(cache) == [130, 2])
        #expect(try cache.lockedBytes() == 100)
        cache.close()
    }

    /// A cache from before locations (v3) keeps its objects; a playlist's location is stored and read back after
    /// a reopen, and a version stored without one clears it.
    @Test func aCacheFromBeforeLocationsKeepsItsObjectsAndThenRemembersThem() throws {
        let dir = try TemporaryDirectory()
        do {
            let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
            try store(bytes(100), as: key("a.ts"), in: cache)
            try cache.index.write { db in
                try db.execute(
                    sql:
                        "ALTER TABLE objects DROP COLUMN location; ALTER TABLE objects DROP COLUMN tokens; DELETE FROM grdb_migrations WHERE identifier = 'v4-location'"
                )
            }
            cache.close()
        }
        do {
            let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
            let old = try #require(cache.lookup(key("a.ts")))
            #expect(old.location == nil && contents(old.path) == bytes(100))
            let writer = try cache.makeWriter(for: key("watch/p.m3u8"), expectedLength: 8)
            try writer.write(Array("#EXTM3U\n".utf8))
            let stored = try writer.finish(contentType: nil, kind: .playlist, location: "https://cdn.example/v/p.m3u8")
            #expect(stored.location == "https://cdn.example/v/p.m3u8")
            cache.close()
        }
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        #expect(cache.lookup(key("watch/p.m3u8"))?.location == "https://cdn.example/v/p.m3u8")
        try store(bytes(8), as: key("watch/p.m3u8"), in: cache)
        #expect(try #require(cache.lookup(key("watch/p.m3u8"))).location == nil, "a new version without one clears it")
        #expect(try usage(cache) == [108, 2])
        cache.close()
    }

    @Test func secondInstanceSeesTheFirstsObjectsAndKeepsItsWritesInFlight() throws {
        let dir = try TemporaryDirectory()
        let server = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let inFlight = try server.makeWriter(for: key("slow.ts"), expectedLength: 3)
        try inFlight.write([1, 2])

        // `hlscache fetch` opens the same directory while the server runs.
        let fetch = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        #expect(!fetch.recovery.exclusive)
        #expect(fetch.recovery.tempFilesRemoved == 0)
        try store(bytes(200), as: key("prewarmed.ts"), in: fetch)

        let found = try #require(server.lookup(key("prewarmed.ts")))
        #expect(contents(found.path) == bytes(200))
        try inFlight.write([3])
        _ = try inFlight.finish(contentType: nil, kind: .segment)
        #expect(fetch.lookup(key("slow.ts")) != nil)
        #expect(try usage(server) == [203, 2])
        #expect(try usage(fetch) == [203, 2])

        try fetch.setLocked([key("prewarmed.ts")], true)
        #expect(try #require(server.lookup(key("prewarmed.ts"))).locked == false)  // server's memory is a cache
        try fetch.remove(key("slow.ts"))
        #expect(fetch.lookup(key("slow.ts")) == nil)
    }
}
