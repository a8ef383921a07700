import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import HLSProxy

/// The memory tier (`cache.memorySize`): small objects served whole twice are answered from memory, with exactly the
/// head and bytes the disk path sends, and never once the store's version or the file moved on.
@Suite struct MemoryTierTests {
    /// Every header but `Date`, in order.
    private static func headerList(_ response: ProxyHarness.Response) -> [String] {
        response.headers.filter { $0.name.lowercased() != "date" }.map { "\($0.name): \($0.value)" }
    }

    private static func stored(_ harness: ProxyHarness, _ path: String) throws -> CachedObject {
        try #require(harness.store.lookup(CacheKey(try OriginURL(harness.originURL(path)))))
    }

    /// Asks for `url` until the memory tier holds the object stored for `path` (each whole hit from the file reads it
    /// in on the thread pool; how soon depends on the machine, so no deadline decides but a generous one).
    static func warm(_ harness: ProxyHarness, _ url: String, _ path: String, headers: [(String, String)] = []) async throws
        -> CachedObject
    {
        let object = try stored(harness, path)
        try await waitUntil("\(path) to be read into memory") {
            if harness.server.services.memory.holds(object) { return true }
            _ = try await harness.get(url, headers: headers)
            return false
        }
        return object
    }

    /// Rewrites the object's file in place with other bytes of the same length and puts its modification time back:
    /// nothing a `stat` sees changes, so only an answer from memory still has the original bytes.
    static func scribble(over object: CachedObject) throws {
        var info = stat()
        #expect(stat(object.path, &info) == 0)
        let handle = try #require(FileHandle(forWritingAtPath: object.path))
        try handle.write(contentsOf: Data(repeating: 0x47, count: Int(object.size)))
        try handle.close()
        var times = [info.st_atim, info.st_mtim]
        #expect(utimensat(AT_FDCWD, object.path, &times, 0) == 0)
    }

    @Test func aSmallObjectServedTwiceIsThenAnsweredFromMemoryWithTheSameHead() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(60_000)  // within the default cache.memoryMaxObjectSize (64 KiB)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/m.ts")
        let url = harness.url("/m.ts")
        #expect(sameBytes(try await harness.get(url).body, body))
        try await harness.waitForIdle()
        let fromDisk = try await harness.get(url)
        let object = try await Self.warm(harness, url, "/m.ts")
        try Self.scribble(over: object)
        let fromMemory = try await harness.get(url)
        #expect(sameBytes(fromMemory.body, body), "answered from the file, not from memory")
        #expect(Self.headerList(fromMemory) == Self.headerList(fromDisk))
        #expect(fromMemory.headers["Date"].count == 1)
        let head = try await harness.get(url, method: .HEAD)
        #expect(head.status == 200 && head.body.isEmpty)
        #expect(Self.headerList(head) == Self.headerList(fromDisk))
        // A Range request takes the ordinary path, which answers from memory too.
        let partial = try await harness.get(url, headers: [("Range", "bytes=0-3")])
        #expect(partial.status == 206 && partial.body == Array(body[0..<4]))
        let usage = harness.server.services.memory.usage
        #expect(usage.count == 1 && usage.bytes == body.count + MemoryTier.entryOverhead)
        #expect(harness.origin.requests(matching: "/m.ts").count == 1)
        // One read into the tier, and `/metrics` counts it (a counter: the same on the next scrape).
        #expect(harness.server.services.memory.reads == 1)
        for _ in 0..<2 {
            let (samples, types) = try PrometheusText.parse(try await harness.get(harness.base + "/metrics").text)
            #expect(types["hlscache_memory_tier_reads_total"] == "counter")
            #expect(samples.value("hlscache_memory_tier_reads_total") == 1)
        }
    }

    /// Another process (`hlscache fetch`) stores a new version of the same length: until the tier looks at the file
    /// again (``MemoryTier/recheckInterval`` on its clock) the copy in memory — whole, under its own head — is sent;
    /// after that it never is again; the new version is, and in time it is the one in memory.
    @Test func aVersionReplacedByAnotherProcessIsNotAnsweredFromMemory() async throws {
        let clock = StepClock()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.memoryTierClock = { clock.now }
        }
        defer { Task { await harness.shutdown() } }
        let original = randomBytes(40_000)
        harness.origin.setBody(original, contentType: "video/mp2t", for: "/r.ts")
        let url = harness.url("/r.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let object = try await Self.warm(harness, url, "/r.ts")
        let before = try await harness.get(url)
        #expect(sameBytes(before.body, original))

        let replacement = randomBytes(40_000)
        let other = try CacheStore.open(directory: harness.cacheDirectory.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        let writer = try other.makeWriter(for: CacheKey(try OriginURL(harness.originURL("/r.ts"))), expectedLength: 40_000)
        try writer.write(replacement)
        _ = try writer.finish(contentType: "video/mp2t", kind: .segment)
        other.close()
        // Within the interval: the old copy, whole, with the head it was sent with before (replayed and ordinary).
        clock.advance(MemoryTier.recheckInterval - .nanoseconds(1))
        let stale = try await harness.get(url)
        #expect(sameBytes(stale.body, original), "the file was looked at before the interval passed")
        #expect(Self.headerList(stale) == Self.headerList(before))
        let staleRange = try await harness.get(url, headers: [("Range", "bytes=0-9")])
        #expect(staleRange.body == Array(original[0..<10]) && staleRange.headers.first(name: "ETag") == object.etag)
        clock.advance(.nanoseconds(1))
        for _ in 0..<3 {
            #expect(sameBytes(try await harness.get(url).body, replacement))
        }
        #expect(harness.origin.requests(matching: "/r.ts").count == 1)
    }

    /// The same version replaced in this process (a new fetch stored), removed, or evicted: never answered from memory.
    @Test func evictedAndRemovedObjectsLeaveMemory() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(30_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/e.ts")
        let url = harness.url("/e.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        _ = try await Self.warm(harness, url, "/e.ts")
        #expect(harness.server.services.memory.usage.count == 1)
        // Evicted (the size cap, or an item's expiry): the copy in memory goes with it, and the next request is a miss.
        #expect(try harness.store.evict(bytes: 1 << 40) > 0)
        #expect(harness.server.services.memory.usage.count == 0)
        let fresh = randomBytes(30_000)
        harness.origin.setBody(fresh, contentType: "video/mp2t", for: "/e.ts")
        let miss = try await harness.get(url)
        #expect(miss.headers.first(name: "X-Cache") == "MISS")
        #expect(sameBytes(miss.body, fresh))
        try await harness.waitForIdle()
        _ = try await Self.warm(harness, url, "/e.ts")
        // Removed by hand (`hlscache rm`): a miss again, not the copy in memory.
        #expect(try harness.store.remove(CacheKey(try OriginURL(harness.originURL("/e.ts")))))
        let again = randomBytes(30_000)
        harness.origin.setBody(again, contentType: "video/mp2t", for: "/e.ts")
        let second = try await harness.get(url)
        #expect(second.headers.first(name: "X-Cache") == "MISS")
        #expect(sameBytes(second.body, again))
        #expect(harness.origin.requests(matching: "/e.ts").count == 3)
    }

    /// Objects over `cache.memoryMaxObjectSize` never enter; the tier keeps to `cache.memorySize`; 0 disables it.
    @Test func theTierKeepsToItsBounds() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) {
            $0.memoryCacheBytes = 200_000
            $0.memoryMaxObjectBytes = 64_000
        }
        defer { Task { await harness.shutdown() } }
        let large = randomBytes(64_001)
        harness.origin.setBody(large, contentType: "video/mp2t", for: "/large.ts")
        for _ in 0..<4 { #expect(sameBytes(try await harness.get(harness.url("/large.ts")).body, large)) }
        for index in 0..<6 {
            let body = randomBytes(60_000)
            harness.origin.setBody(body, contentType: "video/mp2t", for: "/s\(index).ts")
            _ = try await harness.get(harness.url("/s\(index).ts"))
            try await harness.waitForIdle()
            _ = try await Self.warm(harness, harness.url("/s\(index).ts"), "/s\(index).ts")
            #expect(sameBytes(try await harness.get(harness.url("/s\(index).ts")).body, body))
            let usage = harness.server.services.memory.usage
            #expect(usage.bytes <= 200_000 && usage.count <= 3, "\(usage)")
        }
        #expect(!harness.server.services.memory.holds(try Self.stored(harness, "/large.ts")))
        // The most recent ones stayed.
        #expect(harness.server.services.memory.holds(try Self.stored(harness, "/s5.ts")))
        #expect(!harness.server.services.memory.holds(try Self.stored(harness, "/s0.ts")))

        let disabled = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { $0.memoryCacheBytes = 0 }
        defer { Task { await disabled.shutdown() } }
        let body = randomBytes(10_000)
        disabled.origin.setBody(body, contentType: "video/mp2t", for: "/d.ts")
        for _ in 0..<5 { #expect(sameBytes(try await disabled.get(disabled.url("/d.ts")).body, body)) }
        #expect(disabled.server.services.memory.usage.count == 0)
        #expect(!disabled.server.services.memory.isEnabled)
    }

    /// A stored playlist is replayed for each encoding from memory, and a new version or another token is never.
    @Test func rewrittenPlaylistsAreReplayedForEachEncoding() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<40 { text += "#EXTINF:6.0,\nseg\(index).ts\n" }
        text += "#EXT-X-ENDLIST\n"
        harness.origin.setBody(Array(text.utf8), for: "/p/index.m3u8")
        let url = harness.url("/p/index.m3u8")
        let first = try await harness.get(url)
        try await harness.waitForIdle()
        let expected = first.text
        #expect(expected.contains("/http/127.0.0.1:\(harness.origin.port)/p/seg39.ts"))
        let plain = try await harness.get(url)
        let zipped = try await harness.get(url, headers: [("Accept-Encoding", "gzip")])
        let rewritten = try #require(
            harness.store.lookup(PlaylistService.rewrittenKey(CacheKey(try OriginURL(harness.originURL("/p/index.m3u8"))))))
        let gzipped = try #require(
            harness.store.lookup(PlaylistService.gzipKey(CacheKey(try OriginURL(harness.originURL("/p/index.m3u8"))))))
        let memory = harness.server.services.memory
        try await waitUntil("both playlist answers to be read into memory") {
            if memory.holds(rewritten) && memory.holds(gzipped) { return true }
            _ = try await harness.get(url)
            _ = try await harness.get(url, headers: [("Accept-Encoding", "gzip")])
            return false
        }
        try Self.scribble(over: rewritten)
        try Self.scribble(over: gzipped)
        for _ in 0..<3 {
            let again = try await harness.get(url)
            #expect(again.text == expected)
            #expect(Self.headerList(again) == Self.headerList(plain))
            let again2 = try await harness.get(url, headers: [("Accept-Encoding", "gzip")])
            #expect(TestZlib.decompress(again2.body) == Array(expected.utf8))
            #expect(again2.headers.first(name: "Content-Encoding") == "gzip")
            #expect(Self.headerList(again2) == Self.headerList(zipped))
        }
        #expect(harness.origin.requests(matching: "/p/index.m3u8").count == 1)
    }

    /// A pass over segments twice the tier's size, each asked for twice (as a player and read-ahead, or two viewers,
    /// would), leaves the playlist that was refreshed before it in memory: it is answered from its copy in memory
    /// afterwards (its file scribbled over, the original bytes still come back).
    @Test func aPassOverTwiceTheTierLeavesThePlaylistInMemory() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { $0.memoryCacheBytes = 8 << 20 }
        defer { Task { await harness.shutdown() } }
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<64 { text += "#EXTINF:6.0,\ns\(index).ts\n" }
        text += "#EXT-X-ENDLIST\n"
        harness.origin.setBody(Array(text.utf8), for: "/v/index.m3u8")
        let playlistURL = harness.url("/v/index.m3u8")
        let first = try await harness.get(playlistURL)
        try await harness.waitForIdle()
        let rewritten = try #require(
            harness.store.lookup(PlaylistService.rewrittenKey(CacheKey(try OriginURL(harness.originURL("/v/index.m3u8"))))))
        let memory = harness.server.services.memory
        try await waitUntil("the playlist to be read into memory") {
            if memory.holds(rewritten) { return true }
            _ = try await harness.get(playlistURL)
            return false
        }
        // 64 segments of 256 KiB: 16 MiB through an 8 MiB tier, each asked for twice.
        for index in 0..<64 {
            harness.origin.setBody(randomBytes(256 << 10), contentType: "video/mp2t", for: "/v/s\(index).ts")
            _ = try await harness.get(harness.url("/v/s\(index).ts"))
            try await harness.waitForIdle()
            _ = try await harness.get(harness.url("/v/s\(index).ts"))
            _ = try await harness.get(harness.url("/v/s\(index).ts"))
        }
        let usage = memory.usage
        #expect(usage.bytes <= 8 << 20 && usage.count > 1, "\(usage)")
        #expect(memory.holds(rewritten), "a pass over segments pushed the playlist out")
        try Self.scribble(over: rewritten)
        let again = try await harness.get(playlistURL)
        #expect(again.text == first.text, "the playlist was not answered from memory")
    }

    /// The read into memory runs on the thread pool, never on a request's path: with the pool's only thread held, an
    /// object that earned its place is still answered at once from its file, and enters memory once the thread is free.
    @Test func aTierMissIsAnsweredFromTheFileWhileTheReadWaits() async throws {
        let pool = NIOThreadPool(numberOfThreads: 1)
        pool.start()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory, threadPool: pool)
        defer {
            Task {
                await harness.shutdown()
                try? await pool.shutdownGracefully()
            }
        }
        let body = randomBytes(50_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/w.ts")
        let url = harness.url("/w.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let object = try Self.stored(harness, "/w.ts")
        // The pool's thread held until the test lets it go.
        let held = DispatchSemaphore(value: 0)
        let running = DispatchSemaphore(value: 0)
        pool.submit { _ in
            running.signal()
            held.wait()
        }
        running.wait()
        // Asked for twice from here (it has earned a place): both answered from the file, the read waits.
        for _ in 0..<2 {
            let hit = try await harness.get(url)
            #expect(hit.headers.first(name: "X-Cache") == "HIT" && sameBytes(hit.body, body))
        }
        #expect(!harness.server.services.memory.holds(object), "read on the request's path")
        #expect(harness.server.services.memory.frequency(of: object) >= MemoryTierContents<Int>.minimumFrequency)
        held.signal()
        try await waitUntil("the object to be read in once the thread was free") { harness.server.services.memory.holds(object) }
    }

    /// One raw exchange (HTTP/1.0, `Connection: close`): the head's lines but `Date`, and the body.
    private static func raw(_ harness: ProxyHarness, _ request: String) async throws -> (head: [String], body: [UInt8]) {
        let (response, _) = try await RawHTTP.exchangeBytes(port: harness.port, Array(request.utf8), readTimeout: 60)
        let end = try #require(
            (0..<max(0, response.count - 3)).first {
                response[$0] == 13 && response[$0 + 1] == 10 && response[$0 + 2] == 13 && response[$0 + 3] == 10
            })
        let head = String(decoding: response[..<end], as: UTF8.self).components(separatedBy: "\r\n").filter {
            !$0.lowercased().hasPrefix("date:")
        }
        return (head, Array(response[(end + 4)...]))
    }

    /// Requests that never replay a head — a page's CORS request (its `Origin` echoed), HTTP/1.0, `Connection: close`,
    /// ranges, conditional requests — are answered from memory as well, once two of them were served from the file;
    /// with the disk path's heads, validators and ranges, and never for a version or file that moved on.
    @Test func ordinaryHitsAreAnsweredFromMemory() async throws {
        let clock = StepClock()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.memoryTierClock = { clock.now }
        }
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(50_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/o.ts")
        let url = harness.url("/o.ts")
        let path = "/http/127.0.0.1:\(harness.origin.port)/o.ts"
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        // Only ranges ask for it (a player that always sends `Range: bytes=…`): read in all the same.
        let object = try await Self.warm(harness, url, "/o.ts", headers: [("Range", "bytes=100-")])
        try Self.scribble(over: object)
        let page = [("Origin", "http://localhost:8000")]
        let requests: [(name: String, headers: [(String, String)])] = [
            ("cors", page), ("range", [("Range", "bytes=10-19")]), ("suffix", page + [("Range", "bytes=-5")]),
            ("if-range", [("If-Range", object.etag), ("Range", "bytes=0-9")]),
            ("if-range other", [("If-Range", "\"other\""), ("Range", "bytes=0-9")]),
            ("not modified", [("If-None-Match", object.etag)]), ("precondition", [("If-Match", "\"other\"")]),
            ("unsatisfiable", [("Range", "bytes=60000-")]),
        ]
        var fromMemory: [String: ProxyHarness.Response] = [:]
        for request in requests { fromMemory[request.name] = try await harness.get(url, headers: request.headers) }
        let head10 = try await Self.raw(harness, "GET \(path) HTTP/1.0\r\n\r\n")
        let close = try await Self.raw(harness, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let headClose = try await Self.raw(harness, "HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")

        #expect(sameBytes(fromMemory["cors"]!.body, body), "a CORS request answered from the file")
        #expect(fromMemory["cors"]!.headers.first(name: "Access-Control-Allow-Origin") == "http://localhost:8000")
        #expect(fromMemory["range"]!.status == 206 && fromMemory["range"]!.body == Array(body[10..<20]))
        #expect(fromMemory["range"]!.headers.first(name: "Content-Range") == "bytes 10-19/50000")
        #expect(fromMemory["suffix"]!.status == 206 && fromMemory["suffix"]!.body == Array(body[49_995...]))
        #expect(fromMemory["if-range"]!.status == 206 && fromMemory["if-range"]!.body == Array(body[0..<10]))
        #expect(fromMemory["if-range other"]!.status == 200 && sameBytes(fromMemory["if-range other"]!.body, body))
        #expect(fromMemory["not modified"]!.status == 304 && fromMemory["not modified"]!.body.isEmpty)
        #expect(fromMemory["precondition"]!.status == 412)
        #expect(fromMemory["unsatisfiable"]!.status == 416)
        #expect(fromMemory["unsatisfiable"]!.headers.first(name: "Content-Range") == "bytes */50000")
        #expect(head10.head.first == "HTTP/1.1 200 OK" && sameBytes(head10.body, body), "HTTP/1.0 answered from the file")
        #expect(close.head.contains("Connection: close") && sameBytes(close.body, body), "Connection: close answered from the file")
        #expect(headClose.head.contains("Content-Length: 50000") && headClose.body.isEmpty)

        // The same requests on the disk path (the copy dropped; the file has the scribbled bytes): the same heads.
        harness.server.services.memory.remove([object.key])
        #expect(!harness.server.services.memory.holds(object))
        let fromDisk = try await harness.get(url, headers: [("Range", "bytes=0-3")])
        #expect(fromDisk.status == 206 && fromDisk.body == [0x47, 0x47, 0x47, 0x47], "the file was not scribbled over")
        for request in requests {
            let again = try await harness.get(url, headers: request.headers)
            #expect(again.status == fromMemory[request.name]!.status, "\(request.name)")
            #expect(Self.headerList(again) == Self.headerList(fromMemory[request.name]!), "\(request.name)")
        }
        #expect(try await Self.raw(harness, "GET \(path) HTTP/1.0\r\n\r\n").head == head10.head)
        #expect(try await Self.raw(harness, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").head == close.head)

        // A new version of the same length stored by another process: the old copy (read from the scribbled file) until
        // the file is looked at again, never after.
        _ = try await Self.warm(harness, url, "/o.ts", headers: page)
        let replacement = randomBytes(50_000)
        let other = try CacheStore.open(directory: harness.cacheDirectory.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        let writer = try other.makeWriter(for: object.key, expectedLength: 50_000)
        try writer.write(replacement)
        _ = try writer.finish(contentType: "video/mp2t", kind: .segment)
        other.close()
        let stale = try await harness.get(url, headers: page)
        #expect(stale.body == [UInt8](repeating: 0x47, count: 50_000) && stale.headers.first(name: "ETag") == object.etag)
        #expect(try await harness.get(url, headers: [("Range", "bytes=0-9")]).body == [UInt8](repeating: 0x47, count: 10))
        clock.advance(MemoryTier.recheckInterval)
        for _ in 0..<3 {
            #expect(sameBytes(try await harness.get(url, headers: page).body, replacement))
            #expect(try await harness.get(url, headers: [("Range", "bytes=0-9")]).body == Array(replacement[0..<10]))
        }
        #expect(harness.origin.requests(matching: "/o.ts").count == 1)
    }

    /// Serving from memory holds no pin: an object answered from memory can be evicted at once, and then is not
    /// answered from memory any more.
    @Test func anObjectServedFromMemoryIsNotPinned() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(20_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/p.ts")
        let url = harness.url("/p.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let page = [("Origin", "http://localhost:8000")]
        _ = try await Self.warm(harness, url, "/p.ts", headers: page)
        for _ in 0..<5 { #expect(sameBytes(try await harness.get(url, headers: page).body, body)) }
        #expect(try harness.store.evict(bytes: 1 << 40) > 0, "a pin was left behind")
        #expect(harness.server.services.memory.usage.count == 0)
        let miss = try await harness.get(url, headers: page)
        #expect(miss.headers.first(name: "X-Cache") == "MISS")
        #expect(harness.origin.requests(matching: "/p.ts").count == 2)
    }

    /// Waits (a generous bound, not a measurement) until `condition` holds.
    private static func eventually(_ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(300)
        while !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        return condition()
    }

    /// A large object held in the memory tier, behind a server with `cache.memoryLargeSends` = `limit` that keeps
    /// clients which do not read (a send timeout of an hour); its file scribbled over unless told (what is sent from
    /// the file is then all 0x47); the test client has asked again since, so nothing is counted. The caller shuts
    /// `harness` down.
    private struct LargeObject {
        let harness: ProxyHarness
        let body: [UInt8]
        /// The object's URL through the proxy, and its path (for clients on sockets of their own).
        let url: String
        let path: String
        var memory: MemoryTier { harness.server.services.memory }
        /// A GET of `path`, as a client on its own socket sends it.
        var request: [UInt8] { Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8) }
        /// A client that sends `request` and never reads the answer.
        func stalledClient() throws -> StalledClient { try StalledClient(port: harness.port, request: request) }
    }

    private static func largeObject(
        limit: Int, size: Int = 2 << 20, scribbled: Bool = true, coldSends: ColdSendMode = .file
    ) async throws -> LargeObject {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.memoryLargeSends = limit
            configuration.memoryColdSends = coldSends
            configuration.sendTimeout = .seconds(3600)  // a client that does not read is not closed by the server
        }
        let body = randomBytes(size)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/big.ts")
        let url = harness.url("/big.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let object = try await Self.warm(harness, url, "/big.ts")
        if scribbled { try Self.scribble(over: object) }
        _ = try await harness.get(url, method: .HEAD)  // the test client's connection asks again: not counted
        let memory = harness.server.services.memory
        #expect(try await Self.eventually { memory.largeSendsInFlight == 0 })
        return LargeObject(
            harness: harness, body: body, url: url, path: "/http/127.0.0.1:\(harness.origin.port)/big.ts")
    }

    /// A 2 MiB segment (within the default `cache.memoryMaxObjectSize`) is read in after two serves and then answered
    /// from memory, with the disk path's head.
    @Test func aLargeObjectServedTwiceIsAnsweredFromMemory() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(2 << 20)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/big.ts")
        let url = harness.url("/big.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let fromDisk = try await harness.get(url)
        let object = try await Self.warm(harness, url, "/big.ts")
        try Self.scribble(over: object)
        let fromMemory = try await harness.get(url)
        #expect(sameBytes(fromMemory.body, body), "answered from the file, not from memory")
        #expect(Self.headerList(fromMemory) == Self.headerList(fromDisk))
        let partial = try await harness.get(url, headers: [("Range", "bytes=1000000-")])
        #expect(partial.status == 206 && sameBytes(partial.body, Array(body[1_000_000...])))
        #expect(harness.origin.requests(matching: "/big.ts").count == 1)
    }

    /// With `cache.memoryLargeSends` connections holding a large body sent from memory and not yet read (clients that
    /// do not read it), the next hit of a large object is sent from its file (and counts too); once those are over —
    /// one read to the end and asked again, one gone mid-body, the third asking again — none is counted and hits come
    /// from memory again.
    @Test func largeSendsFromMemoryAreBoundedAndGivenBack() async throws {
        let large = try await Self.largeObject(limit: 2)
        let (harness, body, url, path, memory) = (large.harness, large.body, large.url, large.path, large.memory)
        defer { Task { await harness.shutdown() } }
        let size = body.count
        let stalled = try (0..<2).map { _ in try large.stalledClient() }
        #expect(try await Self.eventually { memory.largeSendsInFlight == 2 }, "\(memory.largeSendsInFlight) in flight")
        // The next hits (replayed or ordinary) take the file: the scribbled bytes.
        let fromFile = try await harness.get(url)
        #expect(fromFile.status == 200 && fromFile.body.count == size)
        #expect(fromFile.body.allSatisfy { $0 == 0x47 }, "answered from memory past cache.memoryLargeSends")
        let rangeFromFile = try await harness.get(url, headers: [("Range", "bytes=0-99999")])
        #expect(rangeFromFile.body == [UInt8](repeating: 0x47, count: 100_000))
        #expect(memory.largeSendsInFlight == 3, "the two stalled clients, and this one: a body from its file counts too")

        // One reads its answer to the end (the original bytes: sent from memory) and asks again; the other goes away
        // mid-body; this client asks again.
        let first = try await stalled[0].readResponse()
        #expect(first.count > size && sameBytes(Array(first.suffix(size)), body))
        try stalled[0].send(Array("HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        stalled[1].close()
        _ = try await harness.get(url, method: .HEAD)
        #expect(try await Self.eventually { memory.largeSendsInFlight == 0 }, "\(memory.largeSendsInFlight) left counted")
        let fromMemory = try await harness.get(url)
        #expect(sameBytes(fromMemory.body, body), "answered from the file once the large sends were over")
        #expect(memory.largeSendsInFlight == 1)
        stalled[0].close()
        #expect(harness.origin.requests(matching: "/big.ts").count == 1)
    }

    /// A copy evicted while a client still holds it for a large send (it has its answer and has not asked again)
    /// counts against the tier's bound until the client asks again: another large object asked for meanwhile is not
    /// read in where the bound has no room left beside it, and enters once the client has asked again and the copy is
    /// freed.
    @Test func anEvictedCopyStillBeingSentCountsAgainstTheBound() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.memoryCacheBytes = 3 << 20
            configuration.memoryMaxObjectBytes = (2 << 20) + 4096
            configuration.sendTimeout = .seconds(3600)  // a client that does not read is not closed by the server
        }
        defer { Task { await harness.shutdown() } }
        let memory = harness.server.services.memory
        let body = randomBytes(2 << 20)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/big.ts")
        let other = randomBytes(2 << 20)
        harness.origin.setBody(other, contentType: "video/mp2t", for: "/other.ts")
        let url = harness.url("/big.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let object = try await Self.warm(harness, url, "/big.ts")
        try Self.scribble(over: object)
        _ = try await harness.get(url, method: .HEAD)  // the test client's connection asks again: not counted
        try await waitUntil("no large send counted") { memory.largeSendsInFlight == 0 }

        // A client is sent the copy (the original bytes: from memory, the file is scribbled over) and has not asked
        // again; the store evicts the object meanwhile.
        let path = "/http/127.0.0.1:\(harness.origin.port)/big.ts"
        let client = try StalledClient(port: harness.port, request: Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        defer { client.close() }
        let answer = try await client.readResponse()
        #expect(answer.count > body.count && sameBytes(Array(answer.suffix(body.count)), body), "not sent from memory")
        #expect(memory.largeSendsInFlight == 1)
        memory.remove([object.key])
        let cost = (2 << 20) + MemoryTier.entryOverhead
        #expect(memory.usage.bytes == 0 && memory.bytesOutside == cost, "\(memory.usage), outside \(memory.bytesOutside)")

        // Another 2 MiB object, asked for again and again: 2 MiB + 2 MiB would pass the 3 MiB bound, so it is not read.
        let otherURL = harness.url("/other.ts")
        _ = try await harness.get(otherURL)
        try await harness.waitForIdle()
        let readsBefore = memory.reads
        for _ in 0..<4 { #expect(sameBytes(try await harness.get(otherURL).body, other)) }
        #expect(memory.reads == readsBefore && memory.usage.count == 0, "read in beside the copy still being sent")

        // The client asks again: the copy is freed, and the other enters.
        try client.send(Array("HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        try await waitUntil("the evicted copy to be freed") { memory.bytesOutside == 0 }
        _ = try await Self.warm(harness, otherURL, "/other.ts")
        #expect(memory.usage.bytes + memory.bytesOutside <= 3 << 20)
    }

    /// A held copy asked for while the large sends are taken (its requests take the file) is still in use: it keeps
    /// its place against an object asked for less. Left unmarked by those requests, it counted as idle once the tier
    /// had been in use for `MemoryTier.idleAfter`, and the first object asked for twice took its place.
    @Test func aCopyAskedForPastTheLargeSendsKeepsItsPlace() async throws {
        let clock = StepClock()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.memoryLargeSends = 1
            configuration.memoryColdSends = .file
            configuration.memoryCacheBytes = 3 << 20  // room for one 2 MiB object
            configuration.memoryTierClock = { clock.now }
            configuration.sendTimeout = .seconds(3600)
        }
        defer { Task { await harness.shutdown() } }
        for name in ["a", "b"] { harness.origin.setBody(randomBytes(2 << 20), contentType: "video/mp2t", for: "/\(name).ts") }
        let (a, b) = (harness.url("/a.ts"), harness.url("/b.ts"))
        _ = try await harness.get(a)
        _ = try await harness.get(b)
        try await harness.waitForIdle()
        let held = try await Self.warm(harness, a, "/a.ts")
        let memory = harness.server.services.memory
        let path = "/http/127.0.0.1:\(harness.origin.port)/a.ts"
        // A client holds the one large send; meanwhile `a` is asked for once a second for 40 s of the tier's use.
        let stalled = try StalledClient(port: harness.port, request: Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        #expect(try await Self.eventually { memory.largeSendsInFlight == 1 })
        for _ in 0..<40 {
            clock.advance(.seconds(1))
            #expect(try await harness.get(a).status == 200)
        }
        stalled.close()
        // This connection asks again (not for `a`: a HEAD of it would mark it as asked for): its large send is over.
        _ = try await harness.get(b, method: .HEAD)
        #expect(try await Self.eventually { memory.largeSendsInFlight == 0 }, "\(memory.largeSendsInFlight) in flight")
        // `b`, asked for four times (its first serve was a miss, not counted), may not evict it; `a` stays held.
        let reads = memory.reads
        for _ in 0..<3 { _ = try await harness.get(b) }
        try await harness.waitForIdle()
        #expect(memory.holds(held), "a copy asked for 40 times in the last 40 s was evicted for one asked for 4 times")
        #expect(memory.reads == reads)
    }

    /// A large body sent from its file counts like one from memory: with the limit held by a client that was sent
    /// its file, the next hit takes the file too; many large bodies in flight all take their files.
    @Test func largeBodiesSentFromTheirFilesCountToo() async throws {
        let large = try await Self.largeObject(limit: 1)
        let (harness, body, url, memory) = (large.harness, large.body, large.url, large.memory)
        defer { Task { await harness.shutdown() } }
        let size = body.count
        let fromMemory = try large.stalledClient()
        #expect(try await Self.eventually { memory.largeSendsInFlight == 1 })
        let fromFile = try large.stalledClient()
        #expect(try await Self.eventually { memory.largeSendsInFlight == 2 }, "sent its file: counted")
        let scrape = try await harness.get(harness.base + "/metrics")
        #expect(try PrometheusText.parse(scrape.text).samples.value("hlscache_memory_large_sends") == 2)
        fromMemory.close()
        #expect(try await Self.eventually { memory.largeSendsInFlight == 1 }, "\(memory.largeSendsInFlight)")
        // The one holding the limit was sent the file: this hit takes the file as well.
        let next = try await harness.get(url)
        #expect(next.status == 200 && next.body.count == size && next.body.allSatisfy { $0 == 0x47 }, "answered from memory")
        let fileAnswer = try await fromFile.readResponse()
        #expect(fileAnswer.count > size && fileAnswer.suffix(size).allSatisfy { $0 == 0x47 }, "the second client was sent the file")
        fromFile.close()
        _ = try await harness.get(url, method: .HEAD)  // this client asks again
        #expect(try await Self.eventually { memory.largeSendsInFlight == 0 }, "\(memory.largeSendsInFlight) left counted")
        let again = try await harness.get(url)
        #expect(sameBytes(again.body, body), "from memory once nothing else is in flight")
    }

    /// While `cache.memoryLargeSends` connections hold a large body, a large object's hits take its file and it is
    /// not read into the tier (a read that no hit would use); a small one still is; once they are over, the large one
    /// is read in and then sent from memory.
    @Test func aLargeObjectIsNotReadInWhileLargeSendsWouldTakeTheirFiles() async throws {
        let large = try await Self.largeObject(limit: 1)
        let (harness, memory) = (large.harness, large.memory)
        defer { Task { await harness.shutdown() } }
        let other = randomBytes(1 << 20)
        harness.origin.setBody(other, contentType: "video/mp2t", for: "/other.ts")
        let small = randomBytes(10_000)
        harness.origin.setBody(small, contentType: "video/mp2t", for: "/small.ts")
        let (otherURL, smallURL) = (harness.url("/other.ts"), harness.url("/small.ts"))
        _ = try await harness.get(otherURL)
        _ = try await harness.get(smallURL)
        try await harness.waitForIdle()
        let stalled = try large.stalledClient()
        #expect(try await Self.eventually { memory.largeSendsInFlight == 1 }, "\(memory.largeSendsInFlight) in flight")
        // Each hit decides on its read before its answer is sent: no read started after these answers, none later.
        let readsBefore = memory.reads
        for _ in 0..<6 {
            let hit = try await harness.get(otherURL)
            #expect(hit.status == 200 && sameBytes(hit.body, other))
        }
        #expect(memory.reads == readsBefore, "a large object was read in while its hits take the file")
        let otherObject = try Self.stored(harness, "/other.ts")
        #expect(!memory.holds(otherObject))
        // A small object is read in as before.
        _ = try await Self.warm(harness, smallURL, "/small.ts")
        #expect(memory.reads == readsBefore + 1)
        stalled.close()
        _ = try await harness.get(otherURL, method: .HEAD)  // this client asks again: nothing held
        #expect(try await Self.eventually { memory.largeSendsInFlight == 0 }, "\(memory.largeSendsInFlight) left counted")
        _ = try await Self.warm(harness, otherURL, "/other.ts")
        try Self.scribble(over: otherObject)
        #expect(sameBytes(try await harness.get(otherURL).body, other), "not sent from memory once read in")
    }

    /// Two 2 MiB objects, `a` and `b`, held in the memory tier of a server on one event loop (so that the test's
    /// client and other connections share it), read in in that order, their files scribbled over (what is sent from
    /// a file is all 0x47); copies count as warm for 3 MiB of other large bodies; idle and stalled clients stay.
    private struct TwoCopies {
        let harness: ProxyHarness
        let group: MultiThreadedEventLoopGroup
        let first: [UInt8]
        let second: [UInt8]
        let urlA: String
        let urlB: String
        var memory: MemoryTier { harness.server.services.memory }

        func shutdown() {
            Task {
                await harness.shutdown()
                try? await group.shutdownGracefully()
            }
        }
    }

    private static func twoCopiesOnOneLoop(coldSends: ColdSendMode) async throws -> TwoCopies {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory,
            configure: { configuration in
                configuration.memoryWarmBytes = 3 << 20
                configuration.memoryColdSends = coldSends
                configuration.idleTimeout = .seconds(3600)  // an idle connection stays until the test closes it
                configuration.sendTimeout = .seconds(3600)  // a client that does not read is not closed by the server
            }, group: group)
        let (first, second) = (randomBytes(2 << 20), randomBytes(2 << 20))
        harness.origin.setBody(first, contentType: "video/mp2t", for: "/a.ts")
        harness.origin.setBody(second, contentType: "video/mp2t", for: "/b.ts")
        let (urlA, urlB) = (harness.url("/a.ts"), harness.url("/b.ts"))
        _ = try await harness.get(urlA)
        _ = try await harness.get(urlB)
        try await harness.waitForIdle()
        try Self.scribble(over: try await Self.warm(harness, urlA, "/a.ts"))
        try Self.scribble(over: try await Self.warm(harness, urlB, "/b.ts"))
        return TwoCopies(harness: harness, group: group, first: first, second: second, urlA: urlA, urlB: urlB)
    }

    /// On an event loop another connection shares, a large copy goes from memory only while it is warm (fewer than
    /// `warmBytes`, here 3 MiB, of other large bodies were sent, from memory or file, since it last went from memory);
    /// a cold one takes its file, a warm one memory; a connection alone on its loop is sent even a cold copy from
    /// memory. One event loop, so that the test's client and an idle connection share it; both files scribbled over,
    /// so the bytes say where an answer came from.
    @Test func aColdLargeCopyTakesItsFileWhereAnotherConnectionSharesTheLoop() async throws {
        let pair = try await Self.twoCopiesOnOneLoop(coldSends: .file)
        let (harness, memory, first, second, urlA, urlB) = (pair.harness, pair.memory, pair.first, pair.second, pair.urlA, pair.urlB)
        defer { pair.shutdown() }
        let idle = try LoopbackSocket.connect(port: harness.port)
        var idleOpen = true
        defer { if idleOpen { close(idle) } }
        #expect(try await Self.eventually { harness.server.services.connections.count == 2 })
        let (objectA, objectB) = (try Self.stored(harness, "/a.ts"), try Self.stored(harness, "/b.ts"))
        #expect(memory.bytesSentSinceWarm(objectB) == 0, "B was read in last")
        #expect((memory.bytesSentSinceWarm(objectA) ?? 0) >= 2 << 20, "B was sent from its file since A was read in")

        // B was read in last: warm, it goes from memory...
        #expect(sameBytes(try await harness.get(urlB).body, second), "a warm copy was not sent from memory")
        // ...and since A was read in, B was sent from its file until read in, and from memory now: at least 4 MiB.
        // A is cold, and takes its file.
        let cold = try await harness.get(urlA)
        #expect(cold.body.count == first.count && cold.body.allSatisfy { $0 == 0x47 }, "a cold copy was sent from memory")
        #expect(memory.holds(try Self.stored(harness, "/a.ts")), "still held: taken from its file by choice")
        // Since B last went from memory, 2 MiB (A's file, counted once although the hit looked at the tier twice):
        // still warm.
        #expect(memory.bytesSentSinceWarm(objectB) == 2 << 20)
        #expect(sameBytes(try await harness.get(urlB).body, second), "a warm copy was not sent from memory")

        // Alone on the loop, the cold copy of A goes from memory.
        close(idle)
        idleOpen = false
        #expect(try await Self.eventually { harness.server.services.connections.count == 1 })
        #expect(sameBytes(try await harness.get(urlA).body, first), "alone on its loop, a cold copy was not sent from memory")
    }

    /// Even where cold copies go from memory (`cache.memoryColdSends` `memory`, or `auto` with fewer than
    /// `cache.memoryLargeSends` large bodies in flight), a cold copy takes its file while a connection waiting for
    /// small answers shares the loop (here an idle one: it holds no large body); once every connection on the loop
    /// holds a large body (a client stalled in one), it goes from memory. One event loop; both files scribbled over,
    /// so the bytes say where an answer came from.
    @Test(arguments: [ColdSendMode.memory, .auto])
    func aColdCopyGoesFromMemoryOnlyWhereEveryConnectionOnTheLoopHoldsALargeBody(mode: ColdSendMode) async throws {
        let pair = try await Self.twoCopiesOnOneLoop(coldSends: mode)
        let (harness, memory, first, urlA, urlB) = (pair.harness, pair.memory, pair.first, pair.urlA, pair.urlB)
        defer { pair.shutdown() }
        let objectA = try Self.stored(harness, "/a.ts")
        let idle = try LoopbackSocket.connect(port: harness.port)
        var idleOpen = true
        defer { if idleOpen { close(idle) } }
        #expect(try await Self.eventually { harness.server.services.connections.count == 2 })
        // B twice: A's copy goes cold (more than 3 MiB of other large bodies since it was read in).
        for _ in 0..<2 { _ = try await harness.get(urlB) }
        #expect((memory.bytesSentSinceWarm(objectA) ?? 0) > 3 << 20)
        let counts = memory.coldSendCounts
        let cold = try await harness.get(urlA)
        #expect(cold.body.count == first.count && cold.body.allSatisfy { $0 == 0x47 }, "sent from memory beside an idle connection")
        #expect(memory.coldSendCounts.file == counts.file + 1 && memory.coldSendCounts.memory == counts.memory)

        // The idle connection goes; a client that never reads holds B's body. Every connection holds a large body.
        close(idle)
        idleOpen = false
        let path = "/http/127.0.0.1:\(harness.origin.port)/b.ts"
        let stalled = try StalledClient(port: harness.port, request: Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
        defer { stalled.close() }
        // Two hold one: the stalled client, and the test's client (A's body, until it asks again).
        #expect(try await Self.eventually { memory.largeSendsInFlight == 2 && harness.server.services.connections.count == 2 })
        #expect((memory.bytesSentSinceWarm(objectA) ?? 0) > 3 << 20, "still cold")
        #expect(sameBytes(try await harness.get(urlA).body, first), "every connection holds a large body: not from memory")
        #expect(memory.coldSendCounts.memory == counts.memory + 1, "\(counts) then \(memory.coldSendCounts)")
    }

    /// With `cache.memoryColdSends` `memory`, a hit past `cache.memoryLargeSends` is sent from memory all the same.
    @Test func coldSendsFromMemoryWhenSoSet() async throws {
        let large = try await Self.largeObject(limit: 1, coldSends: .memory)
        let (harness, body, url, memory) = (large.harness, large.body, large.url, large.memory)
        defer { Task { await harness.shutdown() } }
        let stalled = try large.stalledClient()
        defer { stalled.close() }
        #expect(try await Self.eventually { memory.largeSendsInFlight == 1 })
        for _ in 0..<3 {
            let answer = try await harness.get(url)
            #expect(answer.status == 200 && sameBytes(answer.body, body), "past the large sends, not sent from memory")
        }
        #expect(memory.coldSendCounts.memory >= 3 && memory.coldSendCounts.file == 0, "\(memory.coldSendCounts)")
    }

    /// In `auto`, a cold copy takes its file past `cache.memoryLargeSends` (here 1: a client that never reads holds a
    /// large body) — with many large bodies in flight the copies are out of the caches before they are read — and
    /// goes from memory again once that client is gone; `hlscache_memory_cold_sends_total` counts each way.
    @Test func autoSendsColdCopiesFromTheirFilesPastTheLargeSends() async throws {
        let large = try await Self.largeObject(limit: 1, coldSends: .auto)
        let (harness, body, url, memory) = (large.harness, large.body, large.url, large.memory)
        defer { Task { await harness.shutdown() } }
        let stalled = try large.stalledClient()
        var stalledOpen = true
        defer { if stalledOpen { stalled.close() } }
        #expect(try await Self.eventually { memory.largeSendsInFlight == 1 })
        let before = memory.coldSendCounts
        for _ in 0..<3 {
            let answer = try await harness.get(url)
            #expect(answer.status == 200 && answer.body.count == body.count)
            #expect(answer.body.allSatisfy { $0 == 0x47 }, "past the large sends, sent from memory")
        }
        let crowded = memory.coldSendCounts
        #expect(crowded.file - before.file == 3 && crowded.memory == before.memory, "\(before) then \(crowded)")
        let scrape = try await harness.get(harness.base + "/metrics")
        let samples = try PrometheusText.parse(scrape.text).samples
        #expect(samples.value("hlscache_memory_cold_sends_total", ["way": "file"]) == Double(crowded.file))
        #expect(samples.value("hlscache_memory_cold_sends_total", ["way": "memory"]) == Double(crowded.memory))

        stalled.close()
        stalledOpen = false
        _ = try await harness.get(url, method: .HEAD)  // this connection asks again: its large send is over
        #expect(try await Self.eventually { memory.largeSendsInFlight == 0 }, "\(memory.largeSendsInFlight) in flight")
        #expect(sameBytes(try await harness.get(url).body, body), "the large sends are over: not sent from memory")
    }

    /// A connection that closes mid-body is not counted any more, however many do.
    @Test func connectionsGoneMidBodyAreNotCounted() async throws {
        let large = try await Self.largeObject(limit: 4, size: 3 << 20, scribbled: false)
        let memory = large.memory
        defer { Task { await large.harness.shutdown() } }
        for round in 0..<3 {
            let clients = try (0..<4).map { _ in try large.stalledClient() }
            #expect(try await Self.eventually { memory.largeSendsInFlight == 4 }, "round \(round): \(memory.largeSendsInFlight)")
            for client in clients { client.close() }
            #expect(try await Self.eventually { memory.largeSendsInFlight == 0 }, "round \(round): \(memory.largeSendsInFlight) left")
        }
    }
}

/// A monotonic clock moved by hand (the memory tier's file re-checks).
final class StepClock: Sendable {
    private let nanoseconds = Synchronization.Atomic<UInt64>(1 << 40)

    var now: NIODeadline { .uptimeNanoseconds(nanoseconds.load(ordering: .relaxed)) }

    func advance(_ amount: TimeAmount) {
        nanoseconds.wrappingAdd(UInt64(amount.nanoseconds), ordering: .relaxed)
    }
}

/// A client on 127.0.0.1 that sends one request and does not read its answer (a small `SO_RCVBUF`, set before
/// connecting, keeps the window small) until told to.
final class StalledClient: Sendable {
    private let descriptor: Int32
    private let closed = Synchronization.Atomic<Bool>(false)

    init(port: Int, request: [UInt8]) throws {
        descriptor = try LoopbackSocket.connect(port: port, receiveBuffer: 4096)
        let sent = request.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else {
            // Through close(), which marks it closed: deinit runs for an initialised instance whose init throws, and
            // a second close(2) of the number could close whatever another test opened on it since.
            close()
            throw RawHTTP.SocketError()
        }
    }

    deinit { close() }

    /// Sends more bytes (another request).
    func send(_ bytes: [UInt8]) throws {
        let sent = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw RawHTTP.SocketError() }
    }

    /// Reads one response (head and a `Content-Length` body) to its end, off the test's executor; a read waits at
    /// most 60 s for data.
    func readResponse() async throws -> [UInt8] {
        let descriptor = self.descriptor
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                var timeout = timeval(tv_sec: 60, tv_usec: 0)
                setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 1 << 16)
                var expected: Int?
                while expected.map({ received.count < $0 }) ?? true {
                    let count = recv(descriptor, &buffer, buffer.count, 0)
                    guard count > 0 else { break }
                    received.append(contentsOf: buffer[0..<count])
                    if expected == nil, let end = StalledClient.headEnd(received) {
                        let head = String(decoding: received[..<end], as: UTF8.self).lowercased()
                        let length = head.components(separatedBy: "\r\n").first { $0.hasPrefix("content-length:") }
                            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                        expected = end + 4 + (length ?? 0)
                    }
                }
                if let expected, received.count == expected {
                    continuation.resume(returning: received)
                } else {
                    continuation.resume(throwing: RawHTTP.SocketError())
                }
            }
        }
    }

    private static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        return (0...(bytes.count - 4)).first { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 }
    }

    /// Closes the connection (mid-body, if it was not read to the end).
    func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        Glibc.close(descriptor)
    }
}
