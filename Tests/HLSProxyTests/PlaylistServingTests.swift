import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSPlaylist
import HLSTestSupport
import Testing

@testable import HLSProxy

@Suite struct PlaylistServingTests {
    static let master = """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="en",URI="audio/en.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=1000000,AUDIO="aud"
        v1/index.m3u8
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,URI="v1/iframes.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=2000000,AUDIO="aud"
        https://cdn.elsewhere.example/v2/index.m3u8?token=abc

        """

    static func live(sequence: Int, targetDuration: Int = 2) -> String {
        """
        #EXTM3U
        #EXT-X-TARGETDURATION:\(targetDuration)
        #EXT-X-MEDIA-SEQUENCE:\(sequence)
        #EXTINF:2.0,
        seg\(sequence).ts
        #EXTINF:2.0,
        seg\(sequence + 1).ts

        """
    }

    @Test func masterPlaylistIsRewrittenThroughTheProxyAndGzipped() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array(Self.master.utf8), for: "/vod/master.m3u8")
        let response = try await harness.get(harness.url("/vod/master.m3u8"))
        #expect(response.status == 200)
        #expect(response.headers.first(name: "Content-Type") == "application/vnd.apple.mpegurl")
        let prefix = "/http/127.0.0.1:\(harness.origin.port)/vod/"
        let expected = Self.master
            .replacingOccurrences(of: "URI=\"audio/en.m3u8\"", with: "URI=\"\(prefix)audio/en.m3u8\"")
            .replacingOccurrences(of: "\nv1/index.m3u8", with: "\n\(prefix)v1/index.m3u8")
            .replacingOccurrences(of: "URI=\"v1/iframes.m3u8\"", with: "URI=\"\(prefix)v1/iframes.m3u8\"")
            .replacingOccurrences(
                of: "https://cdn.elsewhere.example/v2/index.m3u8?token=abc", with: "/https/cdn.elsewhere.example/v2/index.m3u8?token=abc")
        #expect(response.text == expected)

        let gzipped = try await harness.get(harness.url("/vod/master.m3u8"), headers: [("Accept-Encoding", "gzip, deflate")])
        #expect(gzipped.headers.first(name: "Content-Encoding") == "gzip")
        #expect(TestZlib.decompress(gzipped.body) == Array(expected.utf8))
        #expect(harness.origin.requests(matching: "master.m3u8").count == 1, "the rewritten playlist is kept")
    }

    /// ffmpeg sends `Range: bytes=0-` with every request: a playlist miss must still be answered with the whole
    /// rewritten playlist, never a pass-through of the origin's raw bytes (found when AES-128 keys bypassed the
    /// key store on the first playback).
    @Test func rangeRequestOnAPlaylistMissGetsTheRewrittenPlaylist() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array(Self.master.utf8), for: "/vod/master.m3u8")
        harness.origin.setBody(Array(Self.master.utf8), for: "/vod/manifest")  // a playlist without .m3u8
        for path in ["/vod/master.m3u8", "/vod/manifest"] {
            let response = try await harness.get(harness.url(path), headers: [("Range", "bytes=0-")])
            #expect(response.status == 200, "\(path)")
            #expect(response.text.contains("/http/127.0.0.1:\(harness.origin.port)/vod/v1/index.m3u8"), "\(path) was not rewritten")
            #expect(!response.text.contains("\nv1/index.m3u8"))
        }
    }

    /// Playlists whose type and path do not say so (`/vod/play?id=7` as `application/octet-stream`, `text/plain`):
    /// the first bytes decide. Proxied as a segment such a playlist reached the player unrewritten (absolute URIs
    /// then bypass the proxy) and, live, was cached for good.
    @Test(arguments: ["application/octet-stream", "text/plain; charset=utf-8", ""])
    func aPlaylistThatDoesNotSaySoIsRecognisedByItsFirstBytes(type: String) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let prefix = "/http/127.0.0.1:\(harness.origin.port)/vod/"
        harness.origin.setBody([0xEF, 0xBB, 0xBF] + Array(Self.master.utf8), contentType: type, for: "/vod/play")
        harness.origin.setBody(Array(Self.master.utf8), contentType: type, for: "/vod/ranged")
        for (path, headers) in [("/vod/play", [(String, String)]()), ("/vod/ranged", [("Range", "bytes=0-")])] {
            let response = try await harness.get(harness.url(path), headers: headers)
            #expect(response.status == 200, "\(path)")
            #expect(response.headers.first(name: "Content-Type") == "application/vnd.apple.mpegurl", "\(path)")
            #expect(response.text.contains("\n\(prefix)v1/index.m3u8"), "\(path) was not rewritten: \(response.text)")
            #expect(response.text.contains("/https/cdn.elsewhere.example/v2/index.m3u8?token=abc"), "\(path)")
            try await harness.waitForIdle()
            let again = try await harness.get(harness.url(path), headers: headers)
            #expect(again.text == response.text, "\(path)")
        }
        #expect(harness.origin.requests(matching: "/vod/play").count == 1, "kept as a rewritten VOD playlist")

        // A live one is still reloaded after half its target duration.
        harness.origin.setBody(Array(Self.live(sequence: 3).utf8), contentType: type, for: "/live/play")
        #expect(try await harness.get(harness.url("/live/play")).text.contains("MEDIA-SEQUENCE:3"))
        harness.origin.setBody(Array(Self.live(sequence: 4).utf8), contentType: type, for: "/live/play")
        try await Task.sleep(for: .milliseconds(1100))  // target duration 2 s: at most 1 s in the cache
        #expect(
            try await harness.get(harness.url("/live/play")).text.contains("MEDIA-SEQUENCE:4"),
            "a live playlist is never cached as a segment")
    }

    /// The same generic types on media: bytes are relayed and cached exactly, whatever their size (also shorter
    /// than it takes to tell), and ranges are served.
    @Test func mediaUnderAGenericTypeIsServedAsItIs() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let segment = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 0x47) }
        let bodies: [String: [UInt8]] = [
            "/media/seg?id=1": segment, "/media/tiny": Array("#EXT".utf8), "/media/empty": [], "/media/notes": Array("#EXTM3UX\n".utf8),
        ]
        for (path, body) in bodies { harness.origin.setBody(body, contentType: "application/octet-stream", for: path) }
        for (path, body) in bodies {
            let first = try await harness.get(harness.url(path))
            #expect(first.status == 200, "\(path)")
            #expect(sameBytes(first.body, body), "\(path)")
            #expect(first.headers.first(name: "Content-Type") == "application/octet-stream", "\(path)")
            try await harness.waitForIdle()
            let hit = try await harness.get(harness.url(path))
            #expect(hit.headers.first(name: "X-Cache") == "HIT", "\(path)")
            #expect(sameBytes(hit.body, body), "\(path)")
        }
        harness.origin.setBody(segment, contentType: "application/octet-stream", for: "/media/ranged")
        let range = try await harness.get(harness.url("/media/ranged"), headers: [("Range", "bytes=0-9")])
        #expect(range.status == 206)
        #expect(sameBytes(range.body, Array(segment[0..<10])))
        let whole = try await harness.get(harness.url("/media/ranged?x=1"), headers: [("Range", "bytes=0-")])
        #expect(sameBytes(whole.body, segment))
        // ffmpeg's "bytes=0-" on a miss is one origin request, without Range, that fills the cache.
        harness.origin.setBody(segment, contentType: "video/mp2t", for: "/media/ffmpeg.ts")
        let first = try await harness.get(harness.url("/media/ffmpeg.ts"), headers: [("Range", "bytes=0-")])
        #expect(first.status == 200 && first.body == segment)
        try await harness.waitForIdle()
        let asked = harness.origin.requests(matching: "/media/ffmpeg.ts")
        #expect(asked.count == 1)
        #expect(asked.allSatisfy { request in !request.headers.contains { $0.0.lowercased() == "range" } })
        let hit = try await harness.get(harness.url("/media/ffmpeg.ts"), headers: [("Range", "bytes=0-")])
        #expect(hit.status == 206 && hit.headers.first(name: "X-Cache") == "HIT" && hit.body == segment)
    }

    /// An origin that labels a whole directory `application/x-mpegURL`, segments included: players ignore a
    /// segment's type, so the proxy must not try to parse one as a playlist (it answered 502 before).
    @Test func aSegmentLabelledAsAPlaylistIsServedAsMedia() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let segment = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 0x47) }
        harness.origin.setBody(segment, contentType: "application/x-mpegURL", for: "/dir/seg1.ts")
        let response = try await harness.get(harness.url("/dir/seg1.ts"))
        #expect(response.status == 200)
        #expect(sameBytes(response.body, segment))
        #expect(response.headers.first(name: "Content-Type") == "video/mp2t")
        try await harness.waitForIdle()
        let hit = try await harness.get(harness.url("/dir/seg1.ts"))
        #expect(hit.headers.first(name: "X-Cache") == "HIT")
        #expect(sameBytes(hit.body, segment))
        let range = try await harness.get(harness.url("/dir/seg1.ts?r=1"), headers: [("Range", "bytes=10-19")])
        #expect(range.status == 206)
        #expect(sameBytes(range.body, Array(segment[10...19])))
        #expect(range.headers.first(name: "Content-Type") == "video/mp2t")
        // A real playlist under the same label is still one.
        harness.origin.setBody(Array(Self.master.utf8), contentType: "application/x-mpegURL", for: "/dir/index.m3u8")
        #expect(
            try await harness.get(harness.url("/dir/index.m3u8")).text.contains("/http/127.0.0.1:\(harness.origin.port)/dir/v1/index.m3u8"))
    }

    /// An origin that writes the viewer's token into the URIs it returns (Wowza, token-propagating CDNs): a player
    /// with a new token gets a playlist fetched with it (the stored one would carry an old, perhaps expired,
    /// token); the same token again is a hit; and with the origin down the stored playlist is still served.
    @Test func aNewTokenGetsAPlaylistFetchedWithIt() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        func media(_ token: String) -> [UInt8] {
            Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg0.ts?token=\(token)\n#EXT-X-ENDLIST\n".utf8)
        }
        for token in ["A", "B", "C"] { harness.origin.setBody(media(token), for: "/tok/index.m3u8?token=\(token)") }
        let first = try await harness.get(harness.url("/tok/index.m3u8?token=A"))
        #expect(first.text.contains("seg0.ts?token=A"))
        let second = try await harness.get(harness.url("/tok/index.m3u8?token=B"))
        #expect(second.status == 200)
        #expect(second.text.contains("seg0.ts?token=B"), "\(second.text)")
        #expect(harness.origin.requests(matching: "/tok/index.m3u8?token=B").count == 1)
        let again = try await harness.get(harness.url("/tok/index.m3u8?token=B"))
        #expect(again.text.contains("seg0.ts?token=B"))
        #expect(harness.origin.requests(containing: "/tok/index.m3u8").count == 2, "the same token again is a hit")

        harness.origin.setFault(.status(503), for: "/tok/index.m3u8")
        let offline = try await harness.get(harness.url("/tok/index.m3u8?token=C"))
        #expect(offline.status == 200, "the origin failing, the stored playlist is served")
        #expect(offline.text.contains("seg0.ts?token=B"))
    }

    /// After a restart the stored playlist still knows (by a digest, never the tokens) what it was fetched with:
    /// the same token is a hit, another one gets a fresh copy.
    @Test func aRestartStillTellsANewTokenFromTheOldOne() async throws {
        let origin = TestOrigin(root: FileManager.default.temporaryDirectory)
        try await origin.startBelowTheEphemeralRange()  // started again on its port below
        func media(_ token: String) -> [UInt8] {
            Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg0.ts?token=\(token)\n#EXT-X-ENDLIST\n".utf8)
        }
        for token in ["A", "B"] { origin.setBody(media(token), for: "/tok/index.m3u8?token=\(token)") }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-tokens-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let first = try await ProxyHarness.start(origin: origin) { $0.cacheDirectory = cache.path }
        #expect(try await first.get(first.url("/tok/index.m3u8?token=A")).text.contains("seg0.ts?token=A"))
        let port = origin.port
        await first.shutdown()  // stops the origin too
        let index = ["index.sqlite", "index.sqlite-wal"].compactMap {
            FileManager.default.contents(atPath: cache.appendingPathComponent($0).path)
        }
        #expect(index.contains { String(decoding: $0, as: UTF8.self).contains("/tok/index.m3u8") }, "the index was read")
        #expect(!index.contains { String(decoding: $0, as: UTF8.self).contains("token=A") }, "a digest, never the token")
        try await origin.start(port: port)

        let second = try await ProxyHarness.start(origin: origin) { $0.cacheDirectory = cache.path }
        defer { Task { await second.shutdown() } }
        #expect(try await second.get(second.url("/tok/index.m3u8?token=A")).headers.first(name: "X-Cache") == "HIT")
        #expect(origin.requests(containing: "/tok/index.m3u8").count == 1)
        let renewed = try await second.get(second.url("/tok/index.m3u8?token=B"))
        #expect(renewed.text.contains("seg0.ts?token=B"), "\(renewed.text)")
        #expect(origin.requests(matching: "/tok/index.m3u8?token=B").count == 1)
    }

    @Test func livePlaylistIsCachedForHalfItsTargetDurationOnly() async throws {
        // The TTL runs on a clock moved by hand: however slow the machine, the second request is within it.
        let clock = StepClock()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) {
            $0.livePlaylistClock = { clock.now }
        }
        defer { Task { await harness.shutdown() } }
        // Target duration 8 s: TTL 4 s.
        harness.origin.setBody(Array(Self.live(sequence: 10, targetDuration: 8).utf8), for: "/live/index.m3u8")
        let first = try await harness.get(harness.url("/live/index.m3u8"))
        #expect(first.text.contains("MEDIA-SEQUENCE:10"))
        harness.origin.setBody(Array(Self.live(sequence: 11, targetDuration: 8).utf8), for: "/live/index.m3u8")
        let cached = try await harness.get(harness.url("/live/index.m3u8"))
        #expect(cached.text.contains("MEDIA-SEQUENCE:10"), "served from memory within TTL")
        clock.advance(.milliseconds(3900))
        let later = try await harness.get(harness.url("/live/index.m3u8"))
        #expect(later.text.contains("MEDIA-SEQUENCE:10"), "still within the 4 s TTL")
        #expect(harness.origin.requests(matching: "/live/index.m3u8").count == 1)
        clock.advance(.milliseconds(200))  // TTL = 8 s × 0.5
        let fresh = try await harness.get(harness.url("/live/index.m3u8"))
        #expect(fresh.text.contains("MEDIA-SEQUENCE:11"), "never stale beyond half the target duration")
        #expect(harness.origin.requests(matching: "/live/index.m3u8").count == 2)
    }

    /// A live playlist stored in the cache (an older `hlscache fetch` refused the item but kept it) is never
    /// served: the proxy drops it and fetches the live one.
    @Test func aStoredLivePlaylistIsDroppedNotServed() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let stale = Array(Self.live(sequence: 3).utf8)
        let key = CacheKey(try OriginURL(harness.origin.baseURL + "/frozen/index.m3u8"))
        let writer = try harness.store.makeWriter(for: key, expectedLength: Int64(stale.count))
        try writer.write(stale)
        _ = try writer.finish(contentType: "application/vnd.apple.mpegurl", kind: .playlist)
        harness.origin.setBody(Array(Self.live(sequence: 40).utf8), for: "/frozen/index.m3u8")
        let answer = try await harness.get(harness.url("/frozen/index.m3u8"))
        #expect(answer.status == 200)
        #expect(answer.text.contains("MEDIA-SEQUENCE:40"), "\(answer.text)")
        #expect(harness.store.lookup(key) == nil)
        #expect(harness.origin.requests(matching: "/frozen/index.m3u8").count == 1)
    }

    /// `EXT-X-DEFINE:IMPORT` (RFC 8216bis §4.4.2.3): a media playlist takes variables from the multivariant playlist
    /// that named it. Through the proxy it gets the values of the master the player loaded; asked for without one
    /// (a restart, a player opening the media playlist directly), the URI stays as written for the player.
    @Test func mediaPlaylistsImportTheVariablesOfTheirMaster() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(
            Array(
                "#EXTM3U\n#EXT-X-DEFINE:QUERYPARAM=\"tok\"\n#EXT-X-DEFINE:NAME=\"dir\",VALUE=\"v1\"\n#EXT-X-STREAM-INF:BANDWIDTH=1000\n{$dir}/index.m3u8?tok={$tok}\n"
                    .utf8),
            for: "/def/master.m3u8")
        let media =
            "#EXTM3U\n#EXT-X-DEFINE:IMPORT=\"tok\"\n#EXT-X-DEFINE:IMPORT=\"dir\"\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg0.ts?tok={$tok}\n#EXTINF:2,\n../{$dir}/seg1.ts\n#EXT-X-ENDLIST\n"
        harness.origin.setBody(Array(media.utf8), for: "/def/v1/index.m3u8")
        harness.origin.setBody(Array(media.utf8), for: "/def/other/index.m3u8")

        // Asked for directly, before any master: served, the imported references kept for the player.
        let direct = try await harness.get(harness.url("/def/other/index.m3u8"))
        #expect(direct.status == 200)
        #expect(direct.text.contains("\nseg0.ts?tok={$tok}\n") && direct.text.contains("\n../{$dir}/seg1.ts\n"), "\(direct.text)")

        let master = try await harness.get(harness.url("/def/master.m3u8?tok=abc"))
        let prefix = "/http/127.0.0.1:\(harness.origin.port)/def/v1"
        #expect(master.text.contains("\(prefix)/index.m3u8?tok=abc\n"), "\(master.text)")
        let variant = try await harness.get(harness.url("/def/v1/index.m3u8?tok=abc"))
        #expect(variant.status == 200)
        #expect(variant.text.contains("\(prefix)/seg0.ts?tok=abc\n"), "\(variant.text)")
        #expect(variant.text.contains("/http/127.0.0.1:\(harness.origin.port)/def/v1/seg1.ts\n"))
    }

    /// Segments of a live playlist are kept for the live window plus two target durations, then asked for again:
    /// an encoder that restarts and reuses its segment names is not answered with the previous run's bytes.
    /// VOD segments are kept with no expiry.
    @Test func liveSegmentsOutliveTheirWindowOnly() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        func playlist(segments: Int, duration: Int) -> String {
            "#EXTM3U\n#EXT-X-TARGETDURATION:\(duration)\n#EXT-X-MEDIA-SEQUENCE:0\n"
                + (0..<segments).map { "#EXTINF:\(duration).0,\nseg\($0).ts\n" }.joined()
        }
        func stored(_ path: String) throws -> CachedObject? { harness.store.lookup(CacheKey(try OriginURL(harness.origin.baseURL + path))) }
        // A window of 3 × 4 s: kept 12 s + 2 × 4 s (room for a loaded machine); the VOD copy has no expiry.
        harness.origin.setBody(Array(playlist(segments: 3, duration: 4).utf8), for: "/long/index.m3u8")
        harness.origin.setBody(Array((playlist(segments: 3, duration: 4) + "#EXT-X-ENDLIST\n").utf8), for: "/vod/index.m3u8")
        for path in ["/long/seg0.ts", "/vod/seg0.ts"] { harness.origin.setBody([UInt8](repeating: 3, count: 1000), for: path) }
        _ = try await harness.get(harness.url("/long/index.m3u8"))
        _ = try await harness.get(harness.url("/vod/index.m3u8"))
        let before = Date()
        #expect(try await harness.get(harness.url("/long/seg0.ts")).status == 200)
        #expect(try await harness.get(harness.url("/vod/seg0.ts")).status == 200)
        // The commit follows the last byte sent to the player: wait for it.
        try await waitUntil("both segments stored", interval: .milliseconds(50)) {
            try stored("/long/seg0.ts") != nil && stored("/vod/seg0.ts") != nil
        }
        let liveSegment = try #require(try stored("/long/seg0.ts"))
        let expiry = try #require(liveSegment.expiresAt, "a live segment expires")
        #expect(expiry > before.addingTimeInterval(19) && expiry < Date().addingTimeInterval(20.5), "window 12 s + 2 × 4 s")
        #expect(try #require(try stored("/vod/seg0.ts")).expiresAt == nil)

        // One segment of 1 s: kept 3 s. The encoder restarts with the same names; past that the origin is asked.
        harness.origin.setBody(Array(playlist(segments: 1, duration: 1).utf8), for: "/run/index.m3u8")
        harness.origin.setBody([UInt8](repeating: 1, count: 1000), for: "/run/seg0.ts")
        _ = try await harness.get(harness.url("/run/index.m3u8"))
        #expect(try await harness.get(harness.url("/run/seg0.ts")).body == [UInt8](repeating: 1, count: 1000))
        harness.origin.setBody([UInt8](repeating: 2, count: 1000), for: "/run/seg0.ts")
        // Its 3 s run from its commit, which may follow the player's last byte: the wait starts once it is done.
        try await harness.waitForIdle()
        try await Task.sleep(for: .milliseconds(3500))
        #expect(try await harness.get(harness.url("/run/seg0.ts")).body == [UInt8](repeating: 2, count: 1000))
        #expect(harness.origin.requests(matching: "/run/seg0.ts").count == 2)
    }

    /// A live stream that ends (ffmpeg writes EXT-X-ENDLIST when stopped) and starts again at the same URL: the
    /// ended playlist is not kept on disk for good, so viewers get the new run.
    @Test func anEndedLiveStreamCanGoLiveAgain() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let path = "/restart/index.m3u8"
        harness.origin.setBody(Array(Self.live(sequence: 10, targetDuration: 1).utf8), for: path)
        #expect(try await harness.get(harness.url(path)).text.contains("MEDIA-SEQUENCE:10"))
        try await Task.sleep(for: .milliseconds(600))  // TTL = 1 s × 0.5
        harness.origin.setBody(Array((Self.live(sequence: 11, targetDuration: 1) + "#EXT-X-ENDLIST\n").utf8), for: path)
        let ended = try await harness.get(harness.url(path))
        #expect(ended.text.contains("MEDIA-SEQUENCE:11") && ended.text.contains("#EXT-X-ENDLIST"))
        #expect(harness.store.lookup(CacheKey(try OriginURL(harness.origin.baseURL + path))) == nil, "not stored for good")
        try await Task.sleep(for: .milliseconds(600))
        harness.origin.setBody(Array(Self.live(sequence: 1, targetDuration: 1).utf8), for: path)
        let again = try await harness.get(harness.url(path))
        #expect(again.text.contains("MEDIA-SEQUENCE:1\n") && !again.text.contains("#EXT-X-ENDLIST"), "\(again.text)")
    }

    /// A live playlist served from memory says `max-age` for what is left of its TTL: a cache in front of the
    /// proxy must not keep a nearly expired copy for a whole TTL more.
    @Test func aLivePlaylistsMaxAgeIsWhatIsLeftOfItsTTL() async throws {
        let clock = StepClock()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) {
            $0.livePlaylistClock = { clock.now }
        }
        defer { Task { await harness.shutdown() } }
        // Target duration 30 s: TTL 15 s, on a clock moved by hand.
        harness.origin.setBody(Array(Self.live(sequence: 10, targetDuration: 30).utf8), for: "/age/index.m3u8")
        let first = try await harness.get(harness.url("/age/index.m3u8"))
        #expect(first.headers.first(name: "Cache-Control") == "max-age=15")
        clock.advance(.seconds(3))
        let cached = try await harness.get(harness.url("/age/index.m3u8"))
        #expect(harness.origin.requests(matching: "/age/index.m3u8").count == 1, "served from memory")
        #expect(cached.headers.first(name: "Cache-Control") == "max-age=12")
    }

    @Test func blockingReloadParametersAlwaysGoToTheOrigin() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array(Self.live(sequence: 5).utf8), for: "/ll/index.m3u8")
        _ = try await harness.get(harness.url("/ll/index.m3u8?_HLS_msn=6&_HLS_part=0"))
        _ = try await harness.get(harness.url("/ll/index.m3u8?_HLS_msn=6&_HLS_part=0"))
        let forwarded = harness.origin.requests(containing: "/ll/index.m3u8")
        #expect(forwarded.count == 2)
        #expect(forwarded.allSatisfy { $0.path.contains("_HLS_msn=6") && $0.path.contains("_HLS_part=0") })
    }

    /// Strict (`playlists.strict`), a malformed playlist is a 502; tolerant (the default), it is served with the line
    /// it cannot read as the origin wrote it, never garbled. What is no playlist is a 502 either way.
    @Test(arguments: [true, false])
    func malformedPlaylistIsA502OrKeptNotAGarbledRewrite(strict: Bool) async throws {
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory, configure: { $0.strictPlaylists = strict })
        defer { Task { await harness.shutdown() } }
        let malformed = "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\n"
        harness.origin.setBody(Array(malformed.utf8), for: "/bad.m3u8")
        let response = try await harness.get(harness.url("/bad.m3u8"))
        if strict {
            #expect(response.status == 502)
            #expect(response.text.contains("corrupted"))
        } else {
            #expect(response.status == 200)
            #expect(response.text == malformed)
        }
        harness.origin.setBody(Array("<html>not a playlist</html>".utf8), for: "/html.m3u8")
        #expect(try await harness.get(harness.url("/html.m3u8")).status == 502)
    }
}
