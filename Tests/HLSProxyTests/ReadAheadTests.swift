import Foundation
import HLSCacheCore
import HLSPlaylist
import HLSTestSupport
import Testing

@testable import HLSProxy

/// Predictive read-ahead: the next segments of the rendition being played are fetched before the player asks.
@Suite(.serialized) struct ReadAheadTests {
    static func stream() async throws -> URL { try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) } }

    @Test func nextSegmentsAreFetchedAheadOfThePlayer() async throws {
        let harness = try await ProxyHarness.start(serving: try await Self.stream())
        defer { Task { await harness.shutdown() } }
        _ = try await harness.get(harness.url("/master.m3u8"))
        _ = try await harness.get(harness.url("/v0/index.m3u8"))
        harness.origin.clearLog()
        let first = try await harness.get(harness.url("/v0/seg000.ts"))
        #expect(first.status == 200)
        try await harness.waitForIdle()
        let fetched = harness.origin.requests.map(\.path)
        #expect(Set(fetched) == ["/v0/seg000.ts", "/v0/seg001.ts", "/v0/seg002.ts", "/v0/seg003.ts"], "origin saw \(fetched)")
        let next = try await harness.get(harness.url("/v0/seg001.ts"))
        #expect(next.headers.first(name: "X-Cache") == "HIT")
        #expect(harness.origin.requests.count == 4, "the player's next request came from the cache")
    }

    @Test func switchingVariantCancelsTheOldReadAhead() async throws {
        let harness = try await ProxyHarness.start(serving: try await Self.stream())
        defer { Task { await harness.shutdown() } }
        for index in 1...3 { harness.origin.setFault(.slow(chunk: 1000, delay: .milliseconds(200)), for: "/v0/seg00\(index).ts") }
        _ = try await harness.get(harness.url("/master.m3u8"))
        _ = try await harness.get(harness.url("/v0/index.m3u8"))
        _ = try await harness.get(harness.url("/v1/index.m3u8"))
        _ = try await harness.get(harness.url("/v0/seg000.ts"))
        #expect(
            harness.server.services.fetches.existing(.stored(CacheKey(storedValue: try Self.key(harness, "/v0/seg002.ts"))))?.purpose
                == .readAhead)
        let switched = try await harness.get(harness.url("/v1/seg001.ts"))
        #expect(switched.status == 200)
        try await harness.waitForIdle()
        for index in 1...3 {
            #expect(
                harness.store.lookup(CacheKey(storedValue: try Self.key(harness, "/v0/seg00\(index).ts"))) == nil,
                "v0 read-ahead kept running")
        }
        #expect(harness.store.lookup(CacheKey(storedValue: try Self.key(harness, "/v1/seg002.ts"))) != nil, "v1 is read ahead now")
    }

    @Test func disabledWithZeroWindow() async throws {
        let harness = try await ProxyHarness.start(serving: try await Self.stream()) { $0.prefetchSegments = 0 }
        defer { Task { await harness.shutdown() } }
        _ = try await harness.get(harness.url("/v0/index.m3u8"))
        harness.origin.clearLog()
        _ = try await harness.get(harness.url("/v0/seg000.ts"))
        try await harness.waitForIdle()
        #expect(harness.origin.requests.map(\.path) == ["/v0/seg000.ts"])
    }

    /// A window found stored is not asked about again while the store is unchanged — and a segment of it evicted
    /// (the store changed) is read ahead again on the player's next request.
    @Test func aWindowFoundStoredIsReadAheadAgainOnceASegmentOfItGoes() async throws {
        let harness = try await ProxyHarness.start(serving: try await Self.stream())
        defer { Task { await harness.shutdown() } }
        _ = try await harness.get(harness.url("/master.m3u8"))
        _ = try await harness.get(harness.url("/v0/index.m3u8"))
        _ = try await harness.get(harness.url("/v0/seg000.ts"))
        try await harness.waitForIdle()
        let window = try ["/v0/seg001.ts", "/v0/seg002.ts", "/v0/seg003.ts"].map { CacheKey(storedValue: try Self.key(harness, $0)) }
        #expect(window.allSatisfy { harness.store.lookup($0) != nil })
        // Found stored, and remembered: asked again, nothing is fetched.
        harness.origin.clearLog()
        #expect(try await harness.get(harness.url("/v0/seg000.ts")).status == 200)
        #expect(try await harness.get(harness.url("/v0/seg000.ts")).status == 200)
        try await harness.waitForIdle()
        #expect(harness.origin.requests.isEmpty, "origin saw \(harness.origin.requests.map(\.path))")
        try harness.store.remove(window[1])
        #expect(try await harness.get(harness.url("/v0/seg000.ts")).status == 200)
        try await MemoryBoundTests.waitUntil("the evicted segment to be read ahead again") { harness.store.lookup(window[1]) != nil }
        #expect(harness.origin.requests.map(\.path) == ["/v0/seg002.ts"])
    }

    /// In a fleet, read-ahead goes through the balancer (`prefetch.through`), which sends a segment that hashes to the
    /// reading node back to it: that request carries the node's own `Via`, and was refused as a loop (508), so the
    /// segments that hash to the node holding their playlist were never read ahead. It is fetched and stored now.
    /// A one-node fleet: the balancer (a TCP relay) sends every read-ahead back here.
    @Test func readAheadTheBalancerSendsBackHereIsFetched() async throws {
        let balancer = try await TCPForwarder.start()
        defer { Task { await balancer.stop() } }
        let harness = try await ProxyHarness.start(serving: try await Self.stream()) {
            $0.prefetchThrough = "http://127.0.0.1:\(balancer.port)"
        }
        balancer.target = harness.port
        defer { Task { await harness.shutdown() } }
        _ = try await harness.get(harness.url("/master.m3u8"))
        _ = try await harness.get(harness.url("/v0/index.m3u8"))
        harness.origin.clearLog()
        #expect(try await harness.get(harness.url("/v0/seg000.ts")).status == 200)
        let ahead = ["/v0/seg001.ts", "/v0/seg002.ts", "/v0/seg003.ts"]
        let keys = try ahead.map { CacheKey(storedValue: try Self.key(harness, $0)) }
        try await MemoryBoundTests.waitUntil("the segments read ahead through the balancer to be stored") {
            keys.allSatisfy { harness.store.lookup($0) != nil }
        }
        let fetched = harness.origin.requests.map(\.path)
        #expect(fetched.sorted() == ["/v0/seg000.ts"] + ahead, "origin saw \(fetched)")
        let next = try await harness.get(harness.url("/v0/seg001.ts"))
        #expect(next.headers.first(name: "X-Cache") == "HIT")
    }

    /// What keeps that exception from looping: the mark is never sent on to the origin. A marked request's origin fetch
    /// carries this server's `Via` and no mark, so if its URL names this server, the loop check still refuses it.
    @Test func theReadAheadMarkIsNotSentOnToTheOrigin() async throws {
        let harness = try await ProxyHarness.start(serving: try await Self.stream())
        defer { Task { await harness.shutdown() } }
        harness.origin.clearLog()
        let response = try await harness.get(harness.url("/v0/seg000.ts"), headers: [(ReadAheadThrough.marker, "1")])
        #expect(response.status == 200)
        let request = try #require(harness.origin.requests.first { $0.path == "/v0/seg000.ts" })
        #expect(request.headers.contains { $0.0.lowercased() == "via" && $0.1.contains(harness.originClient.instanceToken) })
        #expect(!request.headers.contains { $0.0.lowercased() == ReadAheadThrough.marker.lowercased() }, "\(request.headers)")
    }

    static func key(_ harness: ProxyHarness, _ path: String) throws -> String {
        CacheKey(try OriginURL(harness.originURL(path))).value
    }
}

/// The read-ahead index is bounded in segments, not only in playlists: a huge playlist is not learned at all, and
/// past the total the least recently learned playlists go.
@Suite struct ReadAheadIndexBoundsTests {
    static func media(_ count: Int, prefix: String) throws -> Playlist {
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n"
        for index in 0..<count { text += "#EXTINF:4,\n\(prefix)\(index).ts\n" }
        return try Playlist(text + "#EXT-X-ENDLIST\n")
    }

    @Test func aPlaylistOfTooManySegmentsIsNotLearned() throws {
        let index = ReadAheadIndex(window: 3, maxSegmentsPerPlaylist: 100, maxSegments: 250)
        let url = try OriginURL("http://cdn.example/v/big.m3u8")
        index.learn(try Self.media(101, prefix: "big"), key: CacheKey(url), url: url, volatileParameters: [])
        #expect(index.segmentCount == 0)
        for name in ["a", "b", "c"] {
            let url = try OriginURL("http://cdn.example/v/\(name).m3u8")
            index.learn(try Self.media(100, prefix: name), key: CacheKey(url), url: url, volatileParameters: [])
        }
        #expect(index.segmentCount == 200, "the oldest playlist was forgotten past 250 segments")
        let first = try OriginURL("http://cdn.example/v/a0.ts")
        #expect(index.requested(CacheKey(first)).prefetch.isEmpty)
        let last = try OriginURL("http://cdn.example/v/c0.ts")
        #expect(index.requested(CacheKey(last)).prefetch.count == 3)
    }

    /// A window found stored is not planned again while the store's generation stays where it was; a new playlist
    /// learned for the segment, or another generation, plans it again.
    @Test func aWindowFoundStoredIsNotPlannedAgainUntilTheStoreChanges() throws {
        let index = ReadAheadIndex(window: 3)
        let url = try OriginURL("http://cdn.example/v/a.m3u8")
        index.learn(try Self.media(10, prefix: "a"), key: CacheKey(url), url: url, volatileParameters: [])
        let segment = CacheKey(try OriginURL("http://cdn.example/v/a2.ts"))
        #expect(index.requested(segment, generation: 7).prefetch.count == 3)
        index.windowStored(after: segment, generation: 7)
        #expect(index.requested(segment, generation: 7).prefetch.isEmpty)
        #expect(index.requested(CacheKey(try OriginURL("http://cdn.example/v/a3.ts")), generation: 7).prefetch.count == 3)
        #expect(index.requested(segment, generation: 8).prefetch.count == 3)
        #expect(index.requested(segment).prefetch.count == 3)
        index.windowStored(after: segment, generation: 8)
        index.learn(try Self.media(10, prefix: "a"), key: CacheKey(url), url: url, volatileParameters: [])
        #expect(index.requested(segment, generation: 8).prefetch.count == 3)
    }
}
/// The read-ahead index keeps its tables in ``BoundedLRU``s: the playlists a player uses stay when others overflow
/// them, and the variant tables are bounded.
@Suite struct ReadAheadIndexRecencyTests {
    static func media(_ count: Int, prefix: String) throws -> Playlist {
        try ReadAheadIndexBoundsTests.media(count, prefix: prefix)
    }

    static func learn(_ index: ReadAheadIndex, _ name: String, segments: Int = 10) throws {
        let url = try OriginURL("http://cdn.example/v/\(name).m3u8")
        index.learn(try media(segments, prefix: name), key: CacheKey(url), url: url, volatileParameters: [])
    }

    static func plan(_ index: ReadAheadIndex, _ segment: String) throws -> ReadAheadIndex.Plan {
        index.requested(CacheKey(try OriginURL("http://cdn.example/v/\(segment).ts")))
    }

    @Test func thePlaylistAPlayerUsesStaysWhenOthersOverflowTheTable() throws {
        let index = ReadAheadIndex(window: 2, maxPlaylists: 4)
        try Self.learn(index, "playing")
        for round in 0..<20 {
            try Self.learn(index, "other\(round)")
            // The player keeps asking for segments of its playlist.
            #expect(try Self.plan(index, "playing\(round % 8)").prefetch.count == 2, "round \(round)")
            #expect(index.segmentCount <= 40, "at most 4 playlists of 10 segments")
        }
        // The others went least recently used first: only the last three are left.
        #expect(try Self.plan(index, "other160").prefetch.isEmpty)
        #expect(try Self.plan(index, "other170").prefetch.count == 2)
        #expect(index.segmentCount == 40)
    }

    @Test func aPlaylistLearnedAgainReplacesItsSegments() throws {
        let index = ReadAheadIndex(window: 3)
        try Self.learn(index, "live", segments: 5)
        let url = try OriginURL("http://cdn.example/v/live.m3u8")
        // The window moved: segments 3... of another naming.
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n"
        for segment in ["live3", "live4", "next0", "next1"] { text += "#EXTINF:4,\n\(segment).ts\n" }
        index.learn(try Playlist(text), key: CacheKey(url), url: url, volatileParameters: [])
        #expect(index.segmentCount == 4)
        #expect(try Self.plan(index, "live0").prefetch.isEmpty, "a segment that left the window is forgotten")
        #expect(try Self.plan(index, "live3").prefetch.map(\.url.path) == ["/v/live4.ts", "/v/next0.ts", "/v/next1.ts"])
    }

    static func learnMaster(_ index: ReadAheadIndex, _ name: String, variants: [String]) throws {
        var text = "#EXTM3U\n"
        for variant in variants { text += "#EXT-X-STREAM-INF:BANDWIDTH=1000\n\(variant).m3u8\n" }
        let url = try OriginURL("http://cdn.example/v/\(name).m3u8")
        index.learn(try Playlist(text), key: CacheKey(url), url: url, volatileParameters: [])
    }

    @Test func theVariantTableKeepsEightVariantsPerPlaylist() throws {
        // Three playlists: 24 variants. The first of 25 is forgotten, so leaving it for another cancels nothing.
        let index = ReadAheadIndex(window: 1, maxPlaylists: 3)
        try Self.learnMaster(index, "master", variants: (0..<25).map { "v\($0)-" })
        for variant in ["v0-", "v1-", "v2-"] { try Self.learn(index, variant) }
        #expect(try Self.plan(index, "v0-0").cancel.isEmpty)
        #expect(try Self.plan(index, "v1-0").cancel.isEmpty, "v0 is no variant of the master any more")
        #expect(try Self.plan(index, "v2-0").cancel.map(\.value) == [try Self.segmentKey("v1-1")], "v1 and v2 still are")
    }

    @Test func readAheadsAreRememberedForAsManyMultivariantPlaylistsAsPlaylists() throws {
        // Four multivariant playlists each with a read-ahead under way, room for three: the first one's is forgotten,
        // so a switch there cancels nothing; a switch in the last one cancels what its first variant asked for.
        let index = ReadAheadIndex(window: 1, maxPlaylists: 3)
        for master in 0..<4 {
            try Self.learnMaster(index, "m\(master)", variants: ["m\(master)a", "m\(master)b"])
            try Self.learn(index, "m\(master)a")
            #expect(try Self.plan(index, "m\(master)a0").cancel.isEmpty)
        }
        try Self.learn(index, "m0b")
        #expect(try Self.plan(index, "m0b0").cancel.isEmpty)
        try Self.learn(index, "m3b")
        #expect(try Self.plan(index, "m3b0").cancel.map(\.value) == [try Self.segmentKey("m3a1")])
    }

    static func segmentKey(_ segment: String) throws -> String {
        CacheKey(try OriginURL("http://cdn.example/v/\(segment).ts")).value
    }

    @Test func switchingVariantCancelsTheReadAheadOfTheOneLeft() throws {
        let index = ReadAheadIndex(window: 2)
        var text = "#EXTM3U\n"
        for variant in ["a", "b"] { text += "#EXT-X-STREAM-INF:BANDWIDTH=1000\n\(variant).m3u8\n" }
        let url = try OriginURL("http://cdn.example/v/master.m3u8")
        index.learn(try Playlist(text), key: CacheKey(url), url: url, volatileParameters: [])
        try Self.learn(index, "a")
        try Self.learn(index, "b")
        let first = try Self.plan(index, "a0")
        #expect(first.cancel.isEmpty)
        let switched = try Self.plan(index, "b1")
        #expect(switched.cancel == first.prefetch.map(\.key))
        #expect(switched.prefetch.count == 2)
    }

    /// Issue 44's second lead, refuted: a request for the media playlist itself — the plain URL, or its `/rewind/…`
    /// form, which the router hands on as the same target and key — is no variant switch. It plans nothing, cancels
    /// nothing, and the player's next segment of the same variant cancels nothing either.
    @Test func askingForThePlaylistItselfIsNoVariantSwitch() throws {
        let index = ReadAheadIndex(window: 2)
        try Self.learnMaster(index, "master", variants: ["a", "b"])
        try Self.learn(index, "a")
        try Self.learn(index, "b")
        let first = try Self.plan(index, "a0")
        #expect(first.prefetch.count == 2 && first.cancel.isEmpty)
        let playlist = index.requested(CacheKey(try OriginURL("http://cdn.example/v/a.m3u8")))
        #expect(playlist.prefetch.isEmpty && playlist.cancel.isEmpty)
        let next = try Self.plan(index, "a1")
        #expect(next.cancel.isEmpty, "still variant a: its read-ahead goes on")
    }
}
