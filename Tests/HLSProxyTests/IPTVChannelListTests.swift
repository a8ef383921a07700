import Foundation
import HLSCacheCore
import HLSPlaylist
import HLSTestSupport
import Testing

@testable import HLSProxy

/// IPTV channel lists (issue 31): each channel URL through the proxy, the list's tags byte for byte, and the
/// `User-Agent` / `Referer` an `#EXTVLCOPT` names sent with that channel's requests and those of the playlists
/// and segments reached from it.
@Suite struct IPTVChannelListTests {
    @Test func aChannelThatWantsItsUserAgentPlaysThroughTheProxy() async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: made)
        defer { Task { await harness.shutdown() } }
        let agent = "HLSCacheTestTV/1.0 (channel one)"
        let referrer = "http://portal.example/one"
        let channel = try String(contentsOf: made.appendingPathComponent("v0/index.m3u8"), encoding: .utf8)
        let segments = channel.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map { "/v0/" + $0 }
        #expect(segments.count >= 2)
        for path in ["/v0/index.m3u8"] + segments { harness.origin.setFault(.requireHeader("User-Agent", agent), for: path) }
        let origin = "http://127.0.0.1:\(harness.origin.port)"
        let list = """
            #EXTM3U x-tvg-url="\(origin)/epg.xml"
            #EXTINF:-1 tvg-id="one" tvg-logo="\(origin)/logo.png" group-title="News",Channel One
            #EXTVLCOPT:http-user-agent=\(agent)
            #EXTVLCOPT:http-referrer=\(referrer)
            \(origin)/v0/index.m3u8
            #EXTINF:-1 tvg-id="two" group-title="Sport",Channel Two
            #EXTGRP:Sport
            #KODIPROP:inputstream=inputstream.adaptive
            \(origin)/v1/index.m3u8
            #EXTINF:-1 tvg-id="three",Channel Three
            \(origin)/venglish/index.m3u8|User-Agent=Kodi%2F20.0&Referer=http://portal.example/three

            """
        harness.origin.setBody(Array(list.utf8), contentType: "audio/x-mpegurl", for: "/tv/list.m3u")
        let served = try await harness.get(harness.url("/tv/list.m3u"))
        #expect(served.status == 200)
        let proxied = "/http/127.0.0.1:\(harness.origin.port)"
        // Absolute URLs (issue 41: VLC, mpv and Kodi read a leading `/` as a file), the origin's type.
        #expect(served.text == list.replacingOccurrences(of: "\n\(origin)/v", with: "\n\(harness.base)\(proxied)/v"))
        #expect(served.headers.first(name: "Content-Type") == "audio/x-mpegurl")
        // Kodi's `URL|User-Agent=…` suffix: kept in the list, and honoured by the proxy.
        harness.origin.setFault(.requireHeader("User-Agent", "Kodi/20.0"), for: "/venglish/index.m3u8")
        let three = try await harness.get(harness.base + proxied + "/venglish/index.m3u8")
        #expect(three.status == 200, "\(three.text)")
        #expect(
            harness.origin.requests(containing: "/venglish/index.m3u8").allSatisfy { request in
                request.headers.contains { $0.0.lowercased() == "referer" && $0.1 == "http://portal.example/three" }
            })

        // Straight from the origin without the agent: refused.
        #expect(try await harness.get(harness.originURL("/v0/index.m3u8")).status == 403)
        harness.origin.clearLog()
        // Through the proxy: ffmpeg (its own User-Agent) plays channel one; every origin request of it had the agent.
        let frames = try await FFmpeg.frameMD5(harness.base + proxied + "/v0/index.m3u8")
        #expect(frames.count > 25)
        let requests = harness.origin.requests(containing: "/v0/")
        #expect(requests.count >= segments.count + 1)
        for request in requests {
            #expect(request.headers.contains { $0.0.lowercased() == "user-agent" && $0.1 == agent }, "\(request.path)")
            #expect(request.headers.contains { $0.0.lowercased() == "referer" && $0.1 == referrer }, "\(request.path)")
        }
        // Channel two names no agent: its requests carry the proxy's own.
        let two = try await harness.get(harness.base + proxied + "/v1/index.m3u8")
        #expect(two.status == 200)
        #expect(
            harness.origin.requests(containing: "/v1/index.m3u8").allSatisfy { request in
                !request.headers.contains { $0.1 == agent }
            })
        // No read-ahead across channels: asking for channel one's playlist did not open channel two.
        #expect(harness.origin.requests(containing: "/v1/").count == 1)
    }

    /// The headers a channel list names outlive a restart (issue 31): kept in the index, sealed under the master key.
    /// After the restart a player asking for a channel's segment straight away — without the list or the channel's
    /// playlist — still gets them sent to the origin, which refuses requests without them.
    @Test func channelHeadersSurviveARestart() async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: made)
        try await origin.start()
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-restart-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let agent = "HLSCacheTestTV/2.0 (after a restart)"
        let channel = try String(contentsOf: made.appendingPathComponent("v0/index.m3u8"), encoding: .utf8)
        let segments = channel.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map { "/v0/" + $0 }
        try #require(segments.count >= 2)
        for path in ["/v0/index.m3u8"] + segments { origin.setFault(.requireHeader("User-Agent", agent), for: path) }
        let list = """
            #EXTM3U
            #EXTINF:-1 tvg-id="one",Channel One
            #EXTVLCOPT:http-user-agent=\(agent)
            #EXTVLCOPT:http-referrer=http://portal.example/restart
            \(origin.baseURL)/v0/index.m3u8

            """
        origin.setBody(Array(list.utf8), contentType: "audio/x-mpegurl", for: "/tv/list.m3u")
        let configure: (inout ProxyConfiguration) -> Void = {
            $0.cacheDirectory = cache.path
            $0.prefetchSegments = 0
        }
        let first = try await ProxyHarness.start(origin: origin, configure: configure)
        #expect(try await first.get(first.url("/tv/list.m3u")).status == 200)
        let playlist = try await first.get(first.url("/v0/index.m3u8"))
        #expect(playlist.status == 200, "\(playlist.text)")
        #expect(origin.requests(containing: "/v0/\(segments[1].split(separator: "/").last!)").isEmpty)
        await first.stopKeepingOriginAndCache()

        let second = try await ProxyHarness.start(origin: origin, configure: configure)
        defer { Task { await second.shutdown() } }
        origin.clearLog()
        let segment = try await second.get(second.url(segments[1]))
        #expect(segment.status == 200, "the segment after the restart: \(segment.status) \(segment.text.prefix(200))")
        let asked = origin.requests(containing: segments[1])
        #expect(asked.count == 1)
        for request in asked {
            #expect(request.headers.contains { $0.0.lowercased() == "user-agent" && $0.1 == agent })
            #expect(request.headers.contains { $0.0.lowercased() == "referer" && $0.1 == "http://portal.example/restart" })
        }
        // Sealed: the agent is not in the index in the clear.
        #expect(!anyFile(under: cache, contains: Array(agent.utf8)))
    }

    /// A channel whose body has no length is a live stream: relayed, never stored — also after a restart, when a
    /// player comes back to the channel's URL without the list (the proxy keeps which URLs are channels in the index).
    @Test func aChannelWithoutLengthIsRelayedNotStoredEvenAfterARestart() async throws {
        let origin = TestOrigin(root: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        try await origin.start()
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-channel-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let body = (0..<(188 * 2000)).map { UInt8(truncatingIfNeeded: $0 % 188 == 0 ? 0x47 : $0) }
        origin.setBody(body, contentType: "video/mp2t", for: "/live/channel.ts")
        origin.setFault(.noLength(chunk: 188 * 100), for: "/live/channel.ts")
        origin.setBody(body, contentType: "video/mp2t", for: "/vod/film.ts")
        origin.setFault(.noLength(chunk: 188 * 100), for: "/vod/film.ts")
        let list = "#EXTM3U\n#EXTINF:-1 tvg-id=\"two\",Channel Two\n\(origin.baseURL)/live/channel.ts\n"
        origin.setBody(Array(list.utf8), contentType: "audio/x-mpegurl", for: "/tv/list.m3u")
        let configure: (inout ProxyConfiguration) -> Void = { $0.cacheDirectory = cache.path }
        let channelKey = CacheKey(try OriginURL(origin.baseURL + "/live/channel.ts"))

        let first = try await ProxyHarness.start(origin: origin, configure: configure)
        #expect(try await first.get(first.url("/tv/list.m3u")).status == 200)
        let relayed = try await first.get(first.url("/live/channel.ts"))
        #expect(relayed.status == 200 && relayed.body == body)
        // The same kind of body at a URL no list names is stored (it may be a file served without a length).
        #expect(try await first.get(first.url("/vod/film.ts")).body == body)
        try await first.waitForIdle()
        #expect(first.store.lookup(channelKey) == nil, "a channel's body was stored")
        #expect(first.store.lookup(CacheKey(try OriginURL(origin.baseURL + "/vod/film.ts"))) != nil)
        await first.stopKeepingOriginAndCache()

        let second = try await ProxyHarness.start(origin: origin, configure: configure)
        defer { Task { await second.shutdown() } }
        origin.clearLog()
        let again = try await second.get(second.url("/live/channel.ts"))
        #expect(again.status == 200 && again.body == body)
        try await second.waitForIdle()
        #expect(origin.requests(matching: "/live/channel.ts").count == 1)
        #expect(second.store.lookup(channelKey) == nil, "after the restart, the channel's body was stored")
    }
}
