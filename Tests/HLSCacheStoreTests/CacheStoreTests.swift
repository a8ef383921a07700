import Foundation
import HLSTestSupport
import Synchronization
import HLSCacheCore
import HLSCacheStore
import Testing

@Suite struct CacheStoreTests {
    @Test func writeLookupAndETag() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let data = bytes(1000)
        let writer = try cache.makeWriter(for: key("a.ts"), expectedLength: 1000)
        try writer.write(Array(data[0..<400]))
        try data[400...].withUnsafeBytes { try writer.write($0) }
        let stored = try writer.finish(
            contentType: "video/mp2t", kind: .segment, lastModified: Date(timeIntervalSince1970: 1_700_000_000))

        let found = try #require(cache.lookup(key("a.ts")))
        #expect(found == stored)
        #expect(found.size == 1000 && found.contentType == "video/mp2t" && found.kind == .segment)
        #expect(found.key == key("a.ts"))
        #expect(found.lastModified == Date(timeIntervalSince1970: 1_700_000_000))
        #expect(contents(found.path) == data)
        #expect(found.path.hasPrefix(dir.path + "/objects/" + found.keyHash.prefix(2) + "/"))
        #expect(found.etag.hasPrefix("\"") && found.etag.hasSuffix("\"") && !found.etag.hasPrefix("W/"))
        #expect(cache.lookup(key("b.ts")) == nil)
        #expect(try usage(cache) == [1000, 1])

        // A new version replaces the file and changes the etag; an origin etag is kept as given.
        let second = try store(bytes(10, seed: 9), as: key("a.ts"), in: cache)
        #expect(second.etag != stored.etag)
        #expect(contents(try #require(cache.lookup(key("a.ts"))).path) == bytes(10, seed: 9))
        let w = try cache.makeWriter(for: key("p.m3u8"), expectedLength: nil)
        try w.write(Array("#EXTM3U\n".utf8))
        let playlist = try w.finish(contentType: "application/vnd.apple.mpegurl", kind: .playlist, etag: "\"origin-1\"")
        #expect(playlist.etag == "\"origin-1\"" && playlist.kind == .playlist)
        #expect(try usage(cache) == [18, 2])
        #expect(dir.files(in: "tmp").isEmpty)
    }

    @Test func writerIsInvisibleUntilFinish() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let other = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let writer = try cache.makeWriter(for: key("a.ts"), expectedLength: 100)
        try writer.write(bytes(100))
        #expect(cache.lookup(key("a.ts")) == nil)
        #expect(other.lookup(key("a.ts")) == nil)
        #expect(dir.objectFiles().isEmpty)
        #expect(dir.files(in: "tmp").count == 1)
        _ = try writer.finish(contentType: nil, kind: .segment)
        #expect(cache.lookup(key("a.ts")) != nil)
        #expect(other.lookup(key("a.ts")) != nil)
        #expect(dir.files(in: "tmp").isEmpty)
    }

    @Test func expiredObjectsAreNotReturned() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        try store(bytes(10), as: key("live.m3u8"), in: cache, kind: .playlist, expiresAt: Date().addingTimeInterval(-1))
        try store(bytes(10), as: key("vod.m3u8"), in: cache, kind: .playlist, expiresAt: Date().addingTimeInterval(60))
        #expect(cache.lookup(key("live.m3u8")) == nil)
        #expect(try #require(cache.lookup(key("vod.m3u8"))).expiresAt != nil)
        let other = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        #expect(other.lookup(key("live.m3u8")) == nil)
    }

    @Test func lengthMismatchLeavesNothing() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        let short = try cache.makeWriter(for: key("a.ts"), expectedLength: 100)
        try short.write(bytes(60))
        #expect(throws: CacheStoreError.lengthMismatch) { try short.finish(contentType: nil, kind: .segment) }
        #expect(!short.isOpen)

        let long = try cache.makeWriter(for: key("b.ts"), expectedLength: 100)
        try long.write(bytes(60))
        #expect(throws: CacheStoreError.lengthMismatch) { try long.write(bytes(60)) }
        #expect(throws: CacheStoreError.writerClosed) { try long.finish(contentType: nil, kind: .segment) }

        #expect(cache.lookup(key("a.ts")) == nil && cache.lookup(key("b.ts")) == nil)
        #expect(dir.files(in: "tmp").isEmpty && dir.objectFiles().isEmpty)
        #expect(try usage(cache) == [0, 0])
    }

    @Test func abortAndDeinitCleanUp() async throws {
        let dir = try TemporaryDirectory()
        // A cap the writes racing the abort below cannot reach however late the abort comes (at 1 MiB, an aborting
        // thread starved for a second or two could let them grow past it: `cacheFull`, not `writerClosed`).
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        let writer = try cache.makeWriter(for: key("a.ts"), expectedLength: nil)
        try writer.write(bytes(100))
        writer.abort()
        writer.abort()
        #expect(throws: CacheStoreError.writerClosed) { try writer.write(bytes(1)) }
        #expect(dir.files(in: "tmp").isEmpty)

        // Abort from another thread while this one is writing.
        let busy = try cache.makeWriter(for: key("b.ts"), expectedLength: nil)
        // On a thread of its own: the cooperative pool may be held by other tests for a long time on a loaded machine.
        Thread.detachNewThread {
            usleep(20_000)
            busy.abort()
        }
        var failure: CacheStoreError?
        // Until the abort lands, however late a starved machine runs the other task (a bound of 120 s, not a count
        // of writes that a slow scheduler could use up first).
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            do { try busy.write(bytes(64)) } catch let error as CacheStoreError {
                failure = error
                break
            }
            try await Task.sleep(for: .microseconds(50))
        }
        #expect(failure == .writerClosed)
        #expect(dir.files(in: "tmp").isEmpty)

        do {
            let dropped = try cache.makeWriter(for: key("c.ts"), expectedLength: 10)
            try dropped.write(bytes(5))
            #expect(dir.files(in: "tmp").count == 1)
        }
        #expect(dir.files(in: "tmp").isEmpty)
        #expect(cache.lookup(key("c.ts")) == nil && dir.objectFiles().isEmpty)

        // Reservations of aborted writers are released: a cap-sized object still fits.
        let small = try CacheStore.open(directory: dir.path + "/small", maxBytes: 100, freeDiskCushion: 0)
        for _ in 0..<3 { try small.makeWriter(for: key("x.ts"), expectedLength: 100).abort() }
        try store(bytes(100), as: key("x.ts"), in: small)
    }

    @Test func concurrentWritersFromManyThreads() async throws {
        try await onOwnThread { try concurrentWritersFromManyThreadsBlocking() }
    }

    /// Long and blocking: runs on a thread of its own (``onOwnThread(_:)``).
    func concurrentWritersFromManyThreadsBlocking() throws {
        let dir = try TemporaryDirectory()
        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        let threads = 8
        let perThread = 20
        let errors = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            for i in 0..<perThread {
                do {
                    let data = bytes(500 + i, seed: UInt8(t))
                    try store(data, as: key("t\(t)/s\(i).ts"), in: cache)
                    // Everyone also rewrites one shared key: last writer wins, nobody fails.
                    try store(bytes(10, seed: UInt8(t)), as: key("shared.ts"), in: cache)
                    guard let found = cache.lookup(key("t\(t)/s\(i).ts")), contents(found.path) == data else {
                        throw CacheStoreError.corrupted
                    }
                } catch {
                    errors.withLock { $0.append("\(t)/\(i): \(error)") }
                }
            }
        }
        #expect(errors.withLock { $0 } == [])
        #expect(try cache.usage().count == threads * perThread + 1)
        #expect(dir.files(in: "tmp").isEmpty)
        #expect(dir.objectFiles().count == threads * perThread + 1)
        let shared = try #require(cache.lookup(key("shared.ts")))
        #expect(contents(shared.path)?.count == 10)
    }
}
