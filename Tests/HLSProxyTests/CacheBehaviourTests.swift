import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import NIOCore
import Testing

@testable import HLSProxy

@Suite struct CacheBehaviourTests {
    /// A directory with one 1 MiB "segment" of random bytes and a small playlist.
    static func fixture() throws -> (URL, [UInt8]) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fixture-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let bytes = randomBytes(1 << 20)
        try Data(bytes).write(to: dir.appendingPathComponent("seg.ts"))
        try Data(bytes).write(to: dir.appendingPathComponent("other.ts"))
        return (dir, bytes)
    }

    /// What a miss relies on when downloads ended during its store lookup (``ResourceService/LookedUp``): a download
    /// leaves the table only once its object is in the store, so a miss that noted the removals before another
    /// request's download of the same object ended is sent back to the store, where it is, instead of asking the origin
    /// a second time. (A fleet check under load saw one node fetch a segment twice, 30 ms apart, both misses.)
    @Test func aMissThatLookedWhileTheDownloadEndedIsSentBackToTheStore() async throws {
        let (dir, _) = try Self.fixture()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let fetches = harness.server.services.fetches
        let url = try OriginURL(harness.originURL("/seg.ts"))
        let key = CacheKey(url)
        // A request's lookup begins, and misses…
        let seen = fetches.removals
        #expect(harness.store.lookup(key) == nil)
        // …while another request's download of the object runs to its end.
        #expect(try await harness.get(harness.url("/seg.ts")).status == 200)
        try await MemoryBoundTests.waitUntil("the download to leave the table") { fetches.removals != seen }
        #expect(harness.store.lookup(key) != nil, "the download left the table before its object was in the store")
        let resources = harness.server.router.resources
        #expect(resources.originFetch(key: key, url: url, cacheable: true, unlessRemovedSince: seen) == nil)
        #expect(fetches.count == 0)
        // A miss that looked after the end starts a download, as any miss.
        let other = try OriginURL(harness.originURL("/other.ts"))
        let started = resources.originFetch(key: CacheKey(other), url: other, cacheable: true, unlessRemovedSince: fetches.removals)
        #expect(started?.isStarted == true)
        #expect(harness.origin.requests.filter { $0.path == "/seg.ts" }.count == 1)
    }

    @Test func concurrentMissesShareOneOriginRequestAndAllGetEveryByte() async throws {
        let (dir, bytes) = try Self.fixture()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        harness.origin.setFault(.slow(chunk: 64 << 10, delay: .milliseconds(15)), for: "/seg.ts")

        let bodies = try await withThrowingTaskGroup(of: ProxyHarness.Response.self) { group in
            for index in 0..<8 {
                group.addTask {
                    try await Task.sleep(for: .milliseconds(index * 20))  // some join late
                    return try await harness.get(harness.url("/seg.ts"))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(bodies.count == 8)
        for response in bodies {
            #expect(response.status == 200)
            #expect(sameBytes(response.body, bytes))
        }
        #expect(harness.origin.requests(matching: "/seg.ts").count == 1)
        try await harness.waitForIdle()
        let hit = try await harness.get(harness.url("/seg.ts"))
        #expect(hit.headers.first(name: "X-Cache") == "HIT")
        #expect(sameBytes(hit.body, bytes))
        #expect(harness.origin.requests(matching: "/seg.ts").count == 1)
    }

    /// Caching is best effort and happens off the event loop: a segment larger than the whole cache cannot be
    /// stored (the writer is refused on the thread pool), yet every client gets every byte, twice, and nothing is
    /// left behind. With the size announced the refusal comes before any byte is written; without it, the writer
    /// stops at the cap mid-body — both while the client is being served.
    @Test(arguments: [false, true])
    func aSegmentLargerThanTheCacheIsServedButNotStored(chunkedOrigin: Bool) async throws {
        let (dir, bytes) = try Self.fixture()
        let harness = try await ProxyHarness.start(serving: dir, configure: { $0.maxCacheBytes = 256 << 10 })
        defer { Task { await harness.shutdown() } }
        if chunkedOrigin { harness.origin.setFault(.noLength(chunk: 64 << 10), for: "/seg.ts") }
        for attempt in 0..<2 {
            let response = try await harness.get(harness.url("/seg.ts"))
            #expect(response.status == 200)
            #expect(sameBytes(response.body, bytes), "attempt \(attempt)")
            try await harness.waitForIdle()
        }
        #expect(try OriginFaultMatrixTests.stored(harness.store, harness.originURL("/seg.ts")) == nil)
        #expect(harness.origin.requests(matching: "/seg.ts").count == 2)
        #expect(try await OriginFaultMatrixTests.tempFiles(harness.cacheDirectory).isEmpty)
        #expect(try harness.store.usage().bytes == 0)
    }

    /// A hit whose file no longer matches what this process knows of it — truncated by hand, or replaced with a version
    /// of another size by another process — is never sent as if it were right (short of its length, or the first bytes
    /// of the new file under the old length): it is a miss, and the object is looked up afresh afterwards.
    @Test func aFileReplacedOrTruncatedBehindTheServerIsAMiss() async throws {
        let (dir, bytes) = try Self.fixture()
        // The disk path's checks: the memory tier (which would answer from its copy until it looks at the file again)
        // is off; MemoryTierTests checks its own.
        let harness = try await ProxyHarness.start(serving: dir) { $0.memoryCacheBytes = 0 }
        defer { Task { await harness.shutdown() } }
        let url = harness.url("/seg.ts")
        let key = CacheKey(try OriginURL(harness.originURL("/seg.ts")))
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        #expect(try await harness.get(url).headers.first(name: "X-Cache") == "HIT")

        // Truncated by hand.
        let path = try #require(harness.store.lookup(key)).path
        #expect(truncate(path, 100_000) == 0)
        // (A conditional request is never answered from a replayed head: this takes the ordinary hit path; the
        // replacement below takes the replayed one.)
        let afterTruncation = try await harness.get(url, headers: [("If-None-Match", "\"another\"")])
        #expect(afterTruncation.status == 200)
        #expect(sameBytes(afterTruncation.body, bytes))
        #expect(afterTruncation.headers.first(name: "X-Cache") != "HIT")
        try await harness.waitForIdle()
        let refetched = try await harness.get(url)
        #expect(refetched.headers.first(name: "X-Cache") == "HIT")
        #expect(sameBytes(refetched.body, bytes))

        // Replaced by another process with a longer version (the origin changed meanwhile).
        let newer = randomBytes(1_500_000)
        harness.origin.setBody(newer, contentType: "video/mp2t", for: "/seg.ts")
        let other = try CacheStore.open(directory: harness.cacheDirectory.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        let writer = try other.makeWriter(for: key, expectedLength: Int64(newer.count))
        try writer.write(newer)
        _ = try writer.finish(contentType: "video/mp2t", kind: .segment)
        other.close()
        let afterReplacement = try await harness.get(url)
        #expect(afterReplacement.status == 200)
        #expect(sameBytes(afterReplacement.body, newer), "\(afterReplacement.body.count) bytes")
        try await harness.waitForIdle()
        let replaced = try await harness.get(url)
        #expect(replaced.headers.first(name: "X-Cache") == "HIT")
        #expect(sameBytes(replaced.body, newer))
    }

    @Test func missStreamsBeforeTheOriginFinishes() async throws {
        let (dir, _) = try Self.fixture()
        // The origin's read timeout is far off, so a starved test task reads the streamed bytes before the proxy gives up.
        let harness = try await ProxyHarness.start(serving: dir, configureOrigin: { $0.readTimeout = .seconds(120) })
        defer { Task { await harness.shutdown() } }
        // The origin sends the first 64 KiB and then nothing, so it never finishes: the client gets those bytes only
        // if the proxy streams them while its origin download is in flight (a proxy that waited for the whole body
        // would answer with an error after its timeout). No timer involved: a loaded machine cannot break it.
        harness.origin.setFault(.stallAfter(bytes: 64 << 10), for: "/seg.ts")
        var request = HTTPClientRequestFactory.make(harness.url("/seg.ts"))
        request.method = .GET
        let response = try await harness.client.execute(request, timeout: .seconds(120))
        #expect(response.status == .ok)
        var iterator = response.body.makeAsyncIterator()
        var received = 0
        while received < 64 << 10, let chunk = try await iterator.next() { received += chunk.readableBytes }
        #expect(received == 64 << 10)
        #expect(
            try OriginFaultMatrixTests.stored(harness.store, harness.originURL("/seg.ts")) == nil,
            "nothing is cached before the origin finished")
    }

    @Test func truncatedOriginBodyIsNeverCachedAndTheClientSeesAnError() async throws {
        let (dir, bytes) = try Self.fixture()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        harness.origin.setFault(.truncate(bytes: 100_000), for: "/seg.ts")
        await #expect(throws: (any Error).self) {
            let response = try await harness.get(harness.url("/seg.ts"))
            // A response that "succeeds" must not pretend to be complete.
            if response.body.count != bytes.count { throw CancellationError() }
        }
        try await harness.waitForIdle()
        let key = CacheKey(try OriginURL(harness.originURL("/seg.ts")))
        #expect(harness.store.lookup(key) == nil)
        harness.origin.setFault(nil, for: "/seg.ts")
        let good = try await harness.get(harness.url("/seg.ts"))
        #expect(sameBytes(good.body, bytes))
        #expect(harness.origin.requests(matching: "/seg.ts").count == 2)
    }

    @Test func rangeAndConditionalRequestsOnHits() async throws {
        let (dir, bytes) = try Self.fixture()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let url = harness.url("/seg.ts")
        let full = try await harness.get(url)
        #expect(full.headers.first(name: "Content-Type") == "video/mp2t")
        try await harness.waitForIdle()

        let hit = try await harness.get(url)
        let etag = try #require(hit.headers.first(name: "ETag"))
        let lastModified = try #require(hit.headers.first(name: "Last-Modified"))
        #expect(hit.headers.first(name: "Content-Length") == String(bytes.count))

        let partial = try await harness.get(url, headers: [("Range", "bytes=100-199")])
        #expect(partial.status == 206)
        #expect(sameBytes(partial.body, Array(bytes[100...199])))
        #expect(partial.headers.first(name: "Content-Range") == "bytes 100-199/\(bytes.count)")

        let suffix = try await harness.get(url, headers: [("Range", "bytes=-10")])
        #expect(suffix.status == 206)
        #expect(sameBytes(suffix.body, Array(bytes.suffix(10))))

        let open = try await harness.get(url, headers: [("Range", "bytes=1048000-")])
        #expect(sameBytes(open.body, Array(bytes[1_048_000...])))

        // Range is defined for GET only: a HEAD with Range gets the whole object's head on a hit, as on a miss.
        let headRange = try await harness.get(url, headers: [("Range", "bytes=100-199")], method: .HEAD)
        #expect(headRange.status == 200)
        #expect(headRange.headers.first(name: "Content-Length") == String(bytes.count))
        #expect(headRange.headers.first(name: "Content-Range") == nil)
        let headMiss = try await harness.get(harness.url("/other.ts"), headers: [("Range", "bytes=100-199")], method: .HEAD)
        #expect(headMiss.status == 200)

        let outside = try await harness.get(url, headers: [("Range", "bytes=99999999-")])
        #expect(outside.status == 416)
        #expect(outside.headers.first(name: "Content-Range") == "bytes */\(bytes.count)")

        let notModified = try await harness.get(url, headers: [("If-None-Match", etag)])
        #expect(notModified.status == 304)
        #expect(notModified.body.isEmpty)
        let since = try await harness.get(url, headers: [("If-Modified-Since", lastModified)])
        #expect(since.status == 304)
        let changed = try await harness.get(url, headers: [("If-None-Match", "\"something-else\"")])
        #expect(changed.status == 200)
        #expect(sameBytes(changed.body, bytes))

        let head = try await harness.get(url, method: .HEAD)
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(head.headers.first(name: "Content-Length") == String(bytes.count))
        #expect(harness.origin.requests(matching: "/seg.ts").count == 1)
    }

    /// A strong origin ETag is the object's validator everywhere: on the Range miss (relayed), on a full miss, and on
    /// the hits after them, so `If-Range` and `If-None-Match` with it work on the hit. (The hit used to send a tag of
    /// hlscache's own, and the full miss none.)
    @Test func aStrongOriginETagIsTheValidatorOfMissesAndHits() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let tag = "\"6b052b0c-19560\""
        let body = randomBytes(50_000)
        for path in ["/ranged.ts", "/whole.ts"] {
            harness.origin.setBody(body, contentType: "video/mp2t", for: path)
            harness.origin.setETag(tag, for: path)
        }
        let ranged = harness.url("/ranged.ts")
        let partialMiss = try await harness.get(ranged, headers: [("Range", "bytes=0-99")])
        #expect(partialMiss.status == 206)
        #expect(partialMiss.headers.first(name: "ETag") == tag)
        let wholeMiss = try await harness.get(harness.url("/whole.ts"))
        #expect(wholeMiss.headers.first(name: "X-Cache") == "MISS")
        #expect(wholeMiss.headers.first(name: "ETag") == tag)
        try await harness.waitForIdle()
        for url in [ranged, harness.url("/whole.ts")] {
            let hit = try await harness.get(url)
            #expect(hit.headers.first(name: "X-Cache") == "HIT")
            #expect(hit.headers.first(name: "ETag") == tag)
            #expect(try await harness.get(url).headers.first(name: "ETag") == tag, "replayed")
            let resumed = try await harness.get(url, headers: [("Range", "bytes=100-199"), ("If-Range", tag)])
            #expect(resumed.status == 206)
            #expect(sameBytes(resumed.body, Array(body[100...199])))
            #expect(try await harness.get(url, headers: [("If-None-Match", tag)]).status == 304)
            #expect(try await harness.get(url, headers: [("If-Match", tag)]).status == 200)
        }
    }

    /// A weak origin tag does not name exact bytes, and a compressed answer's tag names the compressed ones: neither
    /// is sent with the (decoded) bytes hlscache serves; the miss has none and hits get hlscache's own strong tag.
    @Test func weakOrCompressedOriginETagsAreNotUsed() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(randomBytes(5_000), contentType: "video/mp2t", for: "/weak.ts")
        harness.origin.setETag("W/\"weak-1\"", for: "/weak.ts")
        harness.origin.setBody(Array(String(repeating: "compressible ", count: 500).utf8), contentType: "video/mp2t", for: "/gz.ts")
        harness.origin.setETag("\"gz-1\"", for: "/gz.ts")
        harness.origin.setFault(.encoded("gzip"), for: "/gz.ts")
        for (path, originTag) in [("/weak.ts", "W/\"weak-1\""), ("/gz.ts", "\"gz-1\"")] {
            let miss = try await harness.get(harness.url(path))
            #expect(miss.status == 200)
            #expect(miss.headers.first(name: "ETag") == nil, "\(path)")
            try await harness.waitForIdle()
            let hit = try await harness.get(harness.url(path))
            #expect(hit.headers.first(name: "X-Cache") == "HIT")
            let own = try #require(hit.headers.first(name: "ETag"))
            #expect(own != originTag && !own.hasPrefix("W/"), "\(path): \(own)")
        }
    }

    /// The first hit of a playlist `hlscache fetch` stored (raw only) makes the rewritten copies and leaves the raw
    /// copy as it is: replacing it dropped its expiry and made it a miss for the instant of the commit, when the
    /// playback recorder read the item's timeline without it and never recorded that rendition.
    @Test func aPrewarmedPlaylistsFirstHitLeavesTheStoredCopyAsItIs() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let raw = Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns0.ts\n#EXT-X-ENDLIST\n".utf8)
        let key = CacheKey(try OriginURL(harness.originURL("/prewarmed/index.m3u8")))
        let expiry = Date().addingTimeInterval(3600)
        let writer = try harness.store.makeWriter(for: key, expectedLength: Int64(raw.count))
        try writer.write(raw)
        let stored = try writer.finish(contentType: "application/vnd.apple.mpegurl", kind: .playlist, expiresAt: expiry)

        let hit = try await harness.get(harness.url("/prewarmed/index.m3u8"))
        #expect(hit.status == 200)
        #expect(hit.headers.first(name: "X-Cache") == "HIT")
        #expect(hit.text.contains("/http/127.0.0.1:\(harness.origin.port)/prewarmed/s0.ts"))
        let after = try #require(harness.store.lookup(key))
        #expect(after.etag == stored.etag)
        #expect(after.createdAt == stored.createdAt)
        #expect(after.expiresAt.map { abs($0.timeIntervalSince(expiry)) < 0.01 } == true, "\(String(describing: after.expiresAt))")
        #expect(harness.store.lookup(CacheKey(storedValue: key.value + "#hlscache-rewritten")) != nil)
    }

    /// `hlscache fetch` stores a strong origin ETag with the object too, so a prewarmed segment's hits send the tag a
    /// miss of the same segment would have.
    @Test func prewarmedObjectsKeepTheOriginsStrongETag() async throws {
        let origin = TestOrigin(root: FileManager.default.temporaryDirectory)
        try await origin.start()
        origin.setBody(
            Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns0.ts\n#EXTINF:2,\ns1.ts\n#EXT-X-ENDLIST\n".utf8), for: "/tag/index.m3u8")
        origin.setBody(randomBytes(3_000), contentType: "video/mp2t", for: "/tag/s0.ts")
        origin.setBody(randomBytes(3_000), contentType: "video/mp2t", for: "/tag/s1.ts")
        origin.setETag("\"s0-strong\"", for: "/tag/s0.ts")
        origin.setETag("W/\"s1-weak\"", for: "/tag/s1.ts")
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/tag/index.m3u8")
        #expect(item.state == .cached)
        #expect(fetch.store.lookup(try fetch.key("/tag/s0.ts"))?.etag == "\"s0-strong\"")
        let weak = try #require(fetch.store.lookup(try fetch.key("/tag/s1.ts"))?.etag)
        #expect(weak != "W/\"s1-weak\"" && !weak.hasPrefix("W/"))
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func rangeOnAMissIsAnsweredWithoutWaitingForTheWholeFile() async throws {
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory, configureOrigin: { $0.readTimeout = .seconds(120) })
        defer { Task { await harness.shutdown() } }
        // The origin sends the first 600 000 bytes and then holds until the test releases it: the range answer
        // cannot have waited for the whole file, however slow the machine (checked by state, not by time).
        let size: Int64 = 1 << 20
        harness.origin.setFault(.pattern(length: size, holdAt: 600_000), for: "/other.ts")
        let partial = try await harness.get(harness.url("/other.ts"), headers: [("Range", "bytes=500000-500099")])
        #expect(partial.status == 206)
        #expect(sameBytes(partial.body, Array(TestPattern.bytes(at: 500_000, count: 100).readableBytesView)))
        #expect(harness.server.services.fetches.count == 1, "the whole file is still being fetched")
        // The whole file is filled in the background and becomes a hit.
        harness.origin.releasePattern("/other.ts")
        try await harness.waitForIdle()
        let hit = try await harness.get(harness.url("/other.ts"))
        #expect(hit.headers.first(name: "X-Cache") == "HIT")
        #expect(sameBytes(hit.body, Array(TestPattern.bytes(at: 0, count: Int(size)).readableBytesView)))
    }

    @Test func originErrorsReachTheClientHonestly() async throws {
        let (dir, _) = try Self.fixture()
        // Only the stalled request is meant to hit a read timeout, so it has a proxy of its own with a short one;
        // everything else gets 30 s to connect and to read: a loaded CI machine paused the whole test process for
        // ~20 s, and short timeouts turned an immediate 503, and once a 404, into a 504.
        let harness = try await ProxyHarness.start(
            serving: dir,
            configureOrigin: {
                $0.readTimeout = .seconds(30)
                $0.connectTimeout = .seconds(30)
                $0.retry.maxRetries = 0
            })
        defer { Task { await harness.shutdown() } }
        let impatient = try await ProxyHarness.start(
            serving: dir,
            configureOrigin: {
                $0.readTimeout = .seconds(3); $0.retry.maxRetries = 0
            })
        defer { Task { await impatient.shutdown() } }

        let missing = try await harness.get(harness.url("/nope.ts"))
        #expect(missing.status == 404)
        #expect(missing.text.contains("\"error\":\"notFound\""))

        harness.origin.setFault(.status(503), for: "/seg.ts")
        let unavailable = try await harness.get(harness.url("/seg.ts"))
        #expect(unavailable.status == 503)
        #expect(unavailable.headers.first(name: "Content-Type") == "application/json")

        impatient.origin.setFault(.stall(delay: .seconds(30)), for: "/other.ts")
        let slow = try await impatient.get(impatient.url("/other.ts"))
        #expect(slow.status == 504)
        #expect(slow.text.contains("timeout"))

        harness.origin.setFault(.reset, for: "/seg.ts")
        let reset = try await harness.get(harness.url("/seg.ts"))
        #expect(reset.status == 502)
        #expect(reset.text.contains("network"))

        let dead = try await harness.get("\(harness.base)/http/127.0.0.1:1/x.ts")
        #expect(dead.status == 502)
        #expect(dead.text.contains("\"error\""))
    }
}

enum HTTPClientRequestFactory {
    static func make(_ url: String) -> AsyncHTTPClient.HTTPClientRequest { AsyncHTTPClient.HTTPClientRequest(url: url) }
}

import AsyncHTTPClient

@Suite struct DestinationPolicyThroughProxyTests {
    @Test func hostsOutsideTheAllowListAndMetadataAddressesAreRefused() async throws {
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory,
            configureOrigin: {
                $0.destinationPolicy.allowedHosts = ["cdn.allowed.example"]
            })
        defer { Task { await harness.shutdown() } }
        let refused = try await harness.get(harness.url("/x.ts"))
        #expect(refused.status == 403)
        #expect(refused.text.contains("forbiddenDestination"))
        #expect(harness.origin.requests.isEmpty)
        let metadata = try await harness.get("\(harness.base)/http/169.254.169.254/latest/meta-data/")
        #expect(metadata.status == 403)
    }
}
