import AsyncHTTPClient
import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSProxy

/// Slices of large objects fetched whole (issue 32): a whole-object GET miss of a large object with a validator is one
/// origin request whose body is stored as slices as it streams — clients stream as from any download, later ranges
/// and whole requests are hits from the slices, eviction works per slice, and two versions never mix. A suffix range
/// with nothing stored goes through slices too. Origin bytes are counted at the origin.
@Suite struct WholeSliceTests {
    static let layout = SliceLayout()

    static func presentSlices(_ harness: ProxyHarness, _ key: CacheKey) -> Set<Int64> {
        harness.store.sliceSet(of: key, layout: layout)?.present ?? []
    }

    @Test func aWholeMissOfALargeObjectIsOneOriginRequestStoredAsSlices() async throws {
        let root = try MemoryBoundTests.emptyDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = try await ProxyHarness.start(serving: root, configureOrigin: { $0.readTimeout = .seconds(120) })
        defer { Task { await harness.shutdown() } }
        let size: Int64 = 40_000_000
        let hold: Int64 = 30_000_000
        // The origin holds at 30 MB until released: late joiners come while the object is half stored.
        harness.origin.setFault(.pattern(length: size, holdAt: hold), for: "/film.mp4")
        harness.origin.setETag("\"film-1\"", for: "/film.mp4")
        let url = harness.url("/film.mp4")
        let key = try SliceTests.key(harness, "/film.mp4")
        let client = harness.client
        let count = Self.layout.count(total: size)

        let first = Task { try await MemoryBoundTests.fetchPattern(client, url) }
        try await MemoryBoundTests.waitUntil("the download to reach the hold") {
            (harness.server.services.fetches.existing(.stored(key))?.progressInfo.received ?? 0) >= hold
        }
        // Slices are committed as the body streams, before the download ends.
        try await MemoryBoundTests.waitUntil("the slices before the hold to be stored") {
            Self.presentSlices(harness, key).count >= Int(hold / Self.layout.sliceSize) - 1
        }
        #expect(harness.store.lookup(key) == nil, "not one object")
        // A whole GET joining now reads the stored slices (from the store) and the slice being written, then follows.
        let late = Task { try await MemoryBoundTests.fetchPattern(client, url) }
        try await MemoryBoundTests.waitUntil("the late joiner to subscribe") {
            (harness.server.services.fetches.existing(.stored(key))?.subscriberCount ?? 0) >= 2
        }
        // A range the download already has joins it too.
        let rangeFirst: Int64 = 5_000_123
        let ranged = try await MemoryBoundTests.fetchPattern(
            client, url, headers: [("Range", "bytes=\(rangeFirst)-\(rangeFirst + 2_999_999)")], from: rangeFirst)
        #expect(ranged.status == 206 && ranged.count == 3_000_000 && ranged.matches)
        harness.origin.releasePattern("/film.mp4")
        for task in [first, late] {
            let result = try await task.value
            #expect(result.status == 200)
            #expect(result.count == size)
            #expect(result.matches)
        }
        try await harness.waitForIdle(timeout: .seconds(120))
        let requests = harness.origin.requests(matching: "/film.mp4")
        #expect(requests.count == 1, "one origin request")
        #expect(!(requests.first?.headers.contains { $0.0.lowercased() == "range" } ?? true), "for the whole object, not ranges")
        #expect(harness.origin.patternBytesSent("/film.mp4") == size)
        try await MemoryBoundTests.waitUntil("every slice stored") { Self.presentSlices(harness, key).count == Int(count) }
        #expect(harness.store.lookup(key) == nil)
        #expect(harness.store.sliceSet(of: key, layout: Self.layout)?.validator == "\"film-1\"")
        #expect(
            SliceTests.storedSlice(harness, key, count - 1)?.size == size - (count - 1) * Self.layout.sliceSize, "the last slice is short")
        for index in 0..<count - 1 { #expect(SliceTests.storedSlice(harness, key, index)?.size == Self.layout.sliceSize) }

        // A range afterwards: a hit from the slices, nothing from the origin.
        let inner: Int64 = 12_345_678
        let rangeHit = try await MemoryBoundTests.fetchPattern(
            client, url, headers: [("Range", "bytes=\(inner)-\(inner + 1_999_999)")], from: inner)
        #expect(rangeHit.status == 206 && rangeHit.count == 2_000_000 && rangeHit.matches)
        #expect(rangeHit.cache == "HIT")
        // The whole object afterwards: stitched from the slices, a hit.
        let wholeHit = try await MemoryBoundTests.fetchPattern(client, url)
        #expect(wholeHit.status == 200 && wholeHit.count == size && wholeHit.matches)
        #expect(wholeHit.cache == "HIT")
        let head = try await harness.get(url, method: .HEAD)
        #expect(head.status == 200 && head.headers.first(name: "Content-Length") == String(size))
        #expect(head.headers.first(name: "X-Cache") == "HIT" && head.headers.first(name: "ETag") == "\"film-1\"")
        #expect(harness.origin.patternBytesSent("/film.mp4") == size, "zero origin bytes for the hits")
        #expect(harness.origin.requests(matching: "/film.mp4").count == 1)

        // Eviction takes one slice, not the object; the next whole GET fetches only that slice.
        let store = harness.store
        let freed = try await Task.detached { try store.evict(bytes: 1) }.value
        let missing = Set(0..<count).subtracting(Self.presentSlices(harness, key))
        #expect(missing.count == 1, "one slice evicted: \(missing)")
        let evicted = try #require(missing.first)
        #expect(freed == Self.layout.bytes(of: evicted, total: size).last - Self.layout.bytes(of: evicted, total: size).first + 1)
        let again = try await MemoryBoundTests.fetchPattern(client, url)
        #expect(again.status == 200 && again.count == size && again.matches)
        #expect(again.cache == "MISS")
        #expect(harness.origin.patternBytesSent("/film.mp4") == size + freed, "only the evicted slice again")
        try await MemoryBoundTests.waitUntil("the evicted slice stored again") { Self.presentSlices(harness, key).count == Int(count) }
    }

    @Test func aClientLeavingAWholeMissMidWayLeavesTheObjectStoredAsSlices() async throws {
        let root = try MemoryBoundTests.emptyDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = try await ProxyHarness.start(serving: root)
        defer { Task { await harness.shutdown() } }
        let size: Int64 = 24_000_000
        harness.origin.setFault(.pattern(length: size), for: "/left.mp4")
        harness.origin.setETag("\"left-1\"", for: "/left.mp4")
        let received = try await SlowReader.read(
            port: harness.port, target: "/http/127.0.0.1:\(harness.origin.port)/left.mp4", bodyBytes: 1 << 20)
        #expect(received.matches)
        let key = try SliceTests.key(harness, "/left.mp4")
        let count = Int(Self.layout.count(total: size))
        // Its length is known and within cache.maxObjectSize: it completes in the background, as slices.
        try await MemoryBoundTests.waitUntil("every slice stored") { Self.presentSlices(harness, key).count == count }
        try await harness.waitForIdle(timeout: .seconds(120))
        #expect(harness.store.lookup(key) == nil)
        #expect(harness.origin.requests(matching: "/left.mp4").count == 1)
        let hit = try await MemoryBoundTests.fetchPattern(harness.client, harness.url("/left.mp4"))
        #expect(hit.status == 200 && hit.count == size && hit.matches && hit.cache == "HIT")
        #expect(harness.origin.patternBytesSent("/left.mp4") == size)
    }

    @Test func twoFillsOfAnObjectWhoseETagChangedNeverMixVersions() async throws {
        let root = try MemoryBoundTests.emptyDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = try await ProxyHarness.start(serving: root)
        defer { Task { await harness.shutdown() } }
        let size = 12 * (1 << 20) + 777
        let versionA = randomBytes(size)
        let versionB = randomBytes(size)
        harness.origin.setBody(versionA, contentType: "video/mp4", for: "/v.mp4")
        harness.origin.setETag("\"A\"", for: "/v.mp4")
        let url = harness.url("/v.mp4")
        let key = try SliceTests.key(harness, "/v.mp4")
        let store = harness.store
        let layout = Self.layout
        let count = Int(layout.count(total: Int64(size)))

        let fillA = try await SliceTests.read(harness.client, url)
        #expect(fillA.status == 200 && fillA.complete && fillA.body == versionA)
        try await harness.waitForIdle(timeout: .seconds(120))
        #expect(store.sliceSet(of: key, layout: layout)?.validator == "\"A\"")
        #expect(Self.presentSlices(harness, key).count == count)

        // The origin now has version B, and slice 3 of A was evicted. The next whole GET is stitched from A's slices
        // (its head says A) until slice 3, which the origin answers as B: the connection is closed short, and what
        // came is A's only.
        harness.origin.setBody(versionB, contentType: "video/mp4", for: "/v.mp4")
        harness.origin.setETag("\"B\"", for: "/v.mp4")
        _ = try await Task.detached { try store.remove(layout.key(of: key, slice: 3)) }.value
        let mixed = try await SliceTests.read(harness.client, url)
        #expect(mixed.headers.first(name: "ETag") == "\"A\"")
        #expect(!mixed.complete)
        #expect(mixed.body.count < size)
        #expect(mixed.body == Array(versionA[0..<mixed.body.count]), "only version A's bytes")
        try await MemoryBoundTests.waitUntil("version A's slices dropped") { store.sliceSet(of: key, layout: layout) == nil }

        // The second fill: version B, whole, stored as B's slices only.
        let fillB = try await SliceTests.read(harness.client, url)
        #expect(fillB.status == 200 && fillB.complete && fillB.body == versionB)
        #expect(fillB.headers.first(name: "ETag") == "\"B\"")
        try await harness.waitForIdle(timeout: .seconds(120))
        try await MemoryBoundTests.waitUntil("B's slices stored") { Self.presentSlices(harness, key).count == count }
        for index in 0..<Int64(count) { #expect(SliceTests.storedSlice(harness, key, index)?.etag == "\"B\"") }
        let rangeB = try await SliceTests.read(harness.client, url, headers: [("Range", "bytes=5000000-5000999")])
        #expect(rangeB.status == 206 && rangeB.body == Array(versionB[5_000_000..<5_001_000]))
        #expect(rangeB.headers.first(name: "X-Cache") == "HIT")
    }

    /// Read-ahead fetches the next large segments once: stored as slices, they are not fetched whole again when the
    /// player moves on (the store has no object under their key, only their slices).
    @Test func readAheadDoesNotFetchAgainSegmentsStoredAsSlices() async throws {
        let root = try MemoryBoundTests.emptyDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = try await ProxyHarness.start(serving: root)
        defer { Task { await harness.shutdown() } }
        let size: Int64 = 9_000_000
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:10\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<5 {
            playlist += "#EXTINF:10.0,\nseg\(index).ts\n"
            harness.origin.setFault(.pattern(length: size), for: "/big/seg\(index).ts")
            harness.origin.setETag("\"seg-\(index)\"", for: "/big/seg\(index).ts")
        }
        harness.origin.setBody(Array((playlist + "#EXT-X-ENDLIST\n").utf8), for: "/big/index.m3u8")
        #expect(try await harness.get(harness.url("/big/index.m3u8")).status == 200)
        let first = try await MemoryBoundTests.fetchPattern(harness.client, harness.url("/big/seg0.ts"))
        #expect(first.status == 200 && first.count == size && first.matches)
        try await harness.waitForIdle(timeout: .seconds(120))
        let count = Int(Self.layout.count(total: size))
        for index in 0...3 {
            let key = try SliceTests.key(harness, "/big/seg\(index).ts")
            #expect(Self.presentSlices(harness, key).count == count, "seg\(index) stored as slices")
        }
        // The player moves on: seg1 is a hit from its slices, and read-ahead leaves seg2 and seg3 alone.
        let next = try await MemoryBoundTests.fetchPattern(harness.client, harness.url("/big/seg1.ts"))
        #expect(next.status == 200 && next.count == size && next.matches && next.cache == "HIT")
        try await harness.waitForIdle(timeout: .seconds(120))
        for index in 0...4 {
            #expect(harness.origin.requests(matching: "/big/seg\(index).ts").count == 1, "seg\(index) fetched once")
        }
    }

    @Test func aLargeObjectWithoutAValidatorIsStoredWhole() async throws {
        let root = try MemoryBoundTests.emptyDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = try await ProxyHarness.start(serving: root)
        defer { Task { await harness.shutdown() } }
        let size: Int64 = 10_000_000
        harness.origin.setFault(.pattern(length: size), for: "/plain.ts")
        let miss = try await MemoryBoundTests.fetchPattern(harness.client, harness.url("/plain.ts"))
        #expect(miss.status == 200 && miss.count == size && miss.matches)
        try await harness.waitForIdle(timeout: .seconds(120))
        let key = try SliceTests.key(harness, "/plain.ts")
        #expect(harness.store.lookup(key)?.size == size, "no ETag or Last-Modified: versions cannot be told apart")
        #expect(harness.store.sliceSet(of: key, layout: Self.layout) == nil)
    }

    @Test func aSuffixRangeOnA200MBMissFetchesOnlyTheCoveringSlices() async throws {
        let root = try MemoryBoundTests.emptyDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = try await ProxyHarness.start(serving: root)
        defer { Task { await harness.shutdown() } }
        let size = MemoryBoundTests.bigSize
        harness.origin.setFault(.pattern(length: size), for: "/tail.mp4")
        harness.origin.setETag("\"tail-1\"", for: "/tail.mp4")
        let url = harness.url("/tail.mp4")
        let key = try SliceTests.key(harness, "/tail.mp4")
        let suffix: Int64 = 1_500_000
        let first = size - suffix
        let miss = try await MemoryBoundTests.fetchPattern(harness.client, url, headers: [("Range", "bytes=-\(suffix)")], from: first)
        #expect(miss.status == 206)
        #expect(miss.count == suffix)
        #expect(miss.matches)
        let covering = Self.layout.index(of: first)...Self.layout.index(of: size - 1)
        try await MemoryBoundTests.waitUntil("the covering slices to be stored") {
            covering.allSatisfy { Self.presentSlices(harness, key).contains($0) }
        }
        let sent = harness.origin.patternBytesSent("/tail.mp4")
        let coveringBytes = size - covering.lowerBound * Self.layout.sliceSize
        #expect(sent <= coveringBytes + Self.layout.sliceSize, "the origin sent \(sent) bytes for \(coveringBytes) of covering slices")
        #expect(harness.origin.requests(matching: "/tail.mp4").count == 1, "one origin request, no background fill")
        #expect(harness.server.services.fetches.count == 0)
        #expect(harness.store.lookup(key) == nil)

        // The same suffix again, and a range inside it: hits.
        let again = try await MemoryBoundTests.fetchPattern(harness.client, url, headers: [("Range", "bytes=-\(suffix)")], from: first)
        #expect(again.status == 206 && again.count == suffix && again.matches && again.cache == "HIT")
        let response = try await harness.get(url, headers: [("Range", "bytes=-100")])
        #expect(response.status == 206)
        #expect(response.headers.first(name: "Content-Range") == "bytes \(size - 100)-\(size - 1)/\(size)")
        #expect(response.headers.first(name: "X-Cache") == "HIT")
        #expect(harness.origin.patternBytesSent("/tail.mp4") == sent)
    }

    @Test func aSuffixRangeOfASmallObjectIsRelayedAndFilledWholeAsBefore() async throws {
        let root = try MemoryBoundTests.emptyDirectory()
        defer { try? FileManager.default.removeItem(at: root) }
        let harness = try await ProxyHarness.start(serving: root)
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(3_000_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/small.ts")
        harness.origin.setETag("\"s\"", for: "/small.ts")
        let url = harness.url("/small.ts")
        let part = try await SliceTests.read(harness.client, url, headers: [("Range", "bytes=-1000")])
        #expect(part.status == 206)
        #expect(part.body == Array(body[2_999_000...]))
        #expect(part.headers.first(name: "Content-Range") == "bytes 2999000-2999999/3000000")
        try await harness.waitForIdle(timeout: .seconds(120))
        let key = try SliceTests.key(harness, "/small.ts")
        #expect(harness.store.lookup(key)?.size == 3_000_000, "stored whole by the background fill")
        #expect(harness.store.sliceSet(of: key, layout: Self.layout) == nil)
    }

    @Test func suffixRangesAreReadFromTheHeader() {
        #expect(SliceStitcherStateMachine.suffixLength(of: "bytes=-500") == 500)
        #expect(SliceStitcherStateMachine.suffixLength(of: "bytes= -500") == 500)
        #expect(SliceStitcherStateMachine.suffixLength(of: "bytes=-0") == nil, "unsatisfiable")
        #expect(SliceStitcherStateMachine.suffixLength(of: "bytes=-") == nil)
        #expect(SliceStitcherStateMachine.suffixLength(of: "bytes=-5,-6") == nil)
        #expect(SliceStitcherStateMachine.suffixLength(of: "bytes=100-") == nil)
    }
}
