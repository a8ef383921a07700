import Foundation
import HLSCacheCore
import HLSCacheStore
import Testing

@Suite struct CacheStoreRecoveryTests {
    @Test func recoveryRepairsFilesAndIndex() throws {
        let dir = try TemporaryDirectory()
        var paths: [String: String] = [:]
        do {
            let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
            #expect(cache.recovery.exclusive)
            for name in ["ok.ts", "missing.ts", "truncated.ts"] {
                paths[name] = try store(bytes(100), as: key(name), in: cache).path
            }
            cache.close()
        }
        // A crashed writer's temp file (dead pid), a row whose file is gone, a truncated file, an orphan file.
        _ = FileManager.default.createFile(atPath: dir.path + "/tmp/\(String(repeating: "a", count: 64)).999999999.1.tmp", contents: Data([1, 2]))
        _ = FileManager.default.createFile(atPath: dir.path + "/tmp/junk", contents: Data([1]))
        try FileManager.default.removeItem(atPath: paths["missing.ts"]!)
        try Data(bytes(50)).write(to: URL(fileURLWithPath: paths["truncated.ts"]!))
        try FileManager.default.createDirectory(atPath: dir.path + "/objects/ff", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir.path + "/objects/ff/" + String(repeating: "f", count: 62), contents: Data([7]))

        let cache = try CacheStore.open(directory: dir.path, maxBytes: 1 << 20, freeDiskCushion: 0)
        #expect(cache.recovery.exclusive)
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
