import Foundation
import HLSCacheCore
import HLSTestSupport
import Testing

@testable import HLSProxy

/// Issue 41: IPTV channel lists come back with absolute URLs (VLC, mpv and Kodi read a leading `/` as a file) built
/// from the request's Host only when it names this server, with the origin's Content-Type and every `#` line byte
/// for byte; Kodi's `URL|Name=value` suffix sent by a player is applied and never reaches the origin; an origin URL
/// with `[` `]` in a key's path reaches the origin as written.
@Suite struct ChannelListAbsoluteURLTests {
    static func list(origin: String) -> String {
        """
        #EXTM3U x-tvg-url="\(origin)/epg.xml"
        #EXTINF:-1 tvg-id="one" tvg-logo="\(origin)/logo.png" group-title="News",Channel One
        #EXTVLCOPT:http-user-agent=HLSCacheTestTV/1.0
        #EXTVLCOPT:http-referrer=http://portal.example/one
        \(origin)/v0/index.m3u8
        #EXTINF:-1 tvg-id="two",Channel Two
        #KODIPROP:inputstream.adaptive.stream_headers=User-Agent=Kodi%2F21
        v1/index.m3u8
        #EXTINF:-1 tvg-id="three",Channel Three
        #EXTHTTP:{"User-Agent":"TiviMate/4.7"}
        \(origin)/venglish/index.m3u8|X-Token=abc

        """
    }

    @Test(arguments: [
        ("/tv/list.m3u", "audio/x-mpegurl"), ("/tv/list.m3u8", "audio/mpegurl"), ("/tv/list.m3u8", "application/x-mpegURL"),
        ("/tv/list.m3u", "text/plain; charset=utf-8"), ("/tv/plain", "application/vnd.apple.mpegurl"),
    ])
    func aChannelListGetsAbsoluteURLsAndKeepsItsType(path: String, type: String) async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: made)
        defer { Task { await harness.shutdown() } }
        let origin = "http://127.0.0.1:\(harness.origin.port)"
        let list = Self.list(origin: origin)
        harness.origin.setBody(Array(list.utf8), contentType: type, for: path)
        let proxied = "/http/127.0.0.1:\(harness.origin.port)"
        let expected = list.replacingOccurrences(of: "\n\(origin)/v", with: "\n\(harness.base)\(proxied)/v")
            .replacingOccurrences(of: "\nv1/", with: "\n\(harness.base)\(proxied)/tv/v1/")
        // Asked for twice (a list without EXT-X-ENDLIST is live: from memory or the origin again).
        for round in 0..<2 {
            let served = try await harness.get(harness.url(path))
            #expect(served.status == 200)
            #expect(served.text == expected, "round \(round)")
            #expect(served.headers.first(name: "Content-Type") == type, "round \(round)")
            // Every `#` line as the origin wrote it.
            let hashLines = { (text: String) in text.split(separator: "\n").filter { $0.hasPrefix("#") } }
            #expect(hashLines(served.text) == hashLines(list))
            try await harness.waitForIdle()
        }
        // gzip: the same text.
        let gzipped = try await harness.get(harness.url(path), headers: [("Accept-Encoding", "gzip")])
        #expect(gzipped.headers.first(name: "Content-Encoding") == "gzip")
        #expect(TestZlib.decompress(gzipped.body) == Array(expected.utf8))
        // A Host that does not name this server is not written into the list: the address it was reached at is.
        for host in ["evil.example:\(harness.port)", "evil.example", "127.0.0.2:\(harness.port)"] {
            let answer = try await harness.get(harness.url(path), headers: [("Host", host)])
            #expect(answer.text == expected, "\(host)")
        }
        let named = try await harness.get(harness.url(path), headers: [("Host", "localhost:\(harness.port)")])
        #expect(
            named.text
                == list.replacingOccurrences(of: "\n\(origin)/v", with: "\nhttp://localhost:\(harness.port)\(proxied)/v")
                .replacingOccurrences(of: "\nv1/", with: "\nhttp://localhost:\(harness.port)\(proxied)/tv/v1/"))
    }

    /// A VOD playlist named `.m3u` is stored (the raw copy, with the origin's type, no rewritten copy): a hit is
    /// rewritten again with the asking client's address.
    @Test func aStoredM3UIsServedWithAbsoluteURLsFromTheCache() async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: made)
        defer { Task { await harness.shutdown() } }
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg000.ts\n#EXT-X-ENDLIST\n"
        harness.origin.setBody(Array(text.utf8), contentType: "audio/x-mpegurl", for: "/v0/vod.m3u")
        let proxied = "/http/127.0.0.1:\(harness.origin.port)"
        for host in ["127.0.0.1:\(harness.port)", "localhost:\(harness.port)"] {
            let served = try await harness.get(harness.url("/v0/vod.m3u"), headers: [("Host", host)])
            #expect(served.text == text.replacingOccurrences(of: "\nseg000.ts", with: "\nhttp://\(host)\(proxied)/v0/seg000.ts"))
            #expect(served.headers.first(name: "Content-Type") == "audio/x-mpegurl")
        }
        #expect(harness.origin.requests(matching: "/v0/vod.m3u").count == 1, "the second answer came from the cache")
    }

    /// `http.serverNames`: a configured name (a container's port mapping) is written as asked for.
    @Test func aConfiguredServerNameIsUsed() async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: made) { $0.serverNames = ServerBaseURL(serverNames: ["tvbox.lan:18080"]) }
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(
            Array(Self.list(origin: "http://127.0.0.1:\(harness.origin.port)").utf8), contentType: "audio/x-mpegurl", for: "/l.m3u")
        let served = try await harness.get(harness.url("/l.m3u"), headers: [("Host", "tvbox.lan:18080")])
        #expect(served.text.contains("\nhttp://tvbox.lan:18080/http/127.0.0.1:\(harness.origin.port)/v0/index.m3u8\n"), "\(served.text)")
    }

    /// HLS playlists keep absolute-path references (every HLS player resolves them) and the HLS type.
    @Test func anHLSPlaylistKeepsPathReferences() async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: made)
        defer { Task { await harness.shutdown() } }
        let served = try await harness.get(harness.url("/master.m3u8"))
        #expect(served.headers.first(name: "Content-Type") == "application/vnd.apple.mpegurl")
        #expect(served.text.contains("\n/http/127.0.0.1:\(harness.origin.port)/v0/index.m3u8"))
        #expect(!served.text.contains("http://127.0.0.1:\(harness.port)"))
    }

    /// The channel's headers from `#KODIPROP`, `#EXTHTTP` and Kodi's URL suffix reach the origin; a player that sends
    /// the suffix on to the proxy (`|` as written or `%7C`) gets the channel, and the origin never sees the suffix.
    @Test func channelHeadersFromEveryConventionReachTheOrigin() async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: made)
        defer { Task { await harness.shutdown() } }
        let origin = "http://127.0.0.1:\(harness.origin.port)"
        harness.origin.setBody(Array(Self.list(origin: origin).utf8), contentType: "audio/x-mpegurl", for: "/tv/list.m3u")
        harness.origin.setBody(Array(try Data(contentsOf: made.appendingPathComponent("v1/index.m3u8"))), for: "/tv/v1/index.m3u8")
        harness.origin.setFault(.requireHeader("User-Agent", "Kodi/21"), for: "/tv/v1/index.m3u8")
        harness.origin.setFault(.requireHeader("User-Agent", "TiviMate/4.7"), for: "/venglish/index.m3u8")
        #expect(try await harness.get(harness.url("/tv/list.m3u")).status == 200)
        #expect(try await harness.get(harness.url("/tv/v1/index.m3u8")).status == 200)
        let three = try await harness.get(harness.url("/venglish/index.m3u8"))
        #expect(three.status == 200, "\(three.text)")
        #expect(
            harness.origin.requests(containing: "/venglish/index.m3u8").allSatisfy { request in
                request.headers.contains { $0.0 == "X-Token" && $0.1 == "abc" }
            })
        // A player asks for a URL with Kodi's suffix: applied, and taken off what goes to the origin.
        harness.origin.setFault(.requireHeader("Referer", "http://portal.example/four"), for: "/venglish/seg000.ts")
        for suffix in ["|Referer=http%3A%2F%2Fportal.example%2Ffour&User-Agent=Kodi", "%7CReferer=http://portal.example/four"] {
            let answer = try await RawHTTP.exchange(
                port: harness.port,
                Array(
                    "GET /http/127.0.0.1:\(harness.origin.port)/venglish/seg000.ts\(suffix) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                        .utf8))
            #expect(answer.response.hasPrefix("HTTP/1.1 200"), "\(suffix): \(answer.response.prefix(300))")
        }
        let segmentRequests = harness.origin.requests(containing: "/venglish/seg000.ts")
        #expect(
            !segmentRequests.isEmpty && segmentRequests.allSatisfy { $0.path == "/venglish/seg000.ts" }, "\(segmentRequests.map(\.path))")
        #expect(!harness.origin.requests.contains { $0.path.contains("|") || $0.path.contains("%7C") || $0.path.contains("Referer") })
    }

    /// A segment whose path and query hold `[`, `]`, `|`, `^`, `` ` ``, `{`, `}` (and an escaped Latin-1 octet): asked
    /// for as a player sends it, it reaches the origin as written, and a playlist naming it is rewritten to that target.
    @Test func awkwardCharactersReachTheOriginAsWritten() async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: made)
        defer { Task { await harness.shutdown() } }
        let path = "/x/[a]|b^c`d{e}caf%E9.ts"
        let query = "q=[1]|^`{2}"
        harness.origin.setBody(Array("segment bytes".utf8), contentType: "video/mp2t", for: path)
        harness.origin.setBody(
            Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n[a]|b^c`d{e}caf%E9.ts?\(query)\n#EXT-X-ENDLIST\n".utf8), for: "/x/p.m3u8")
        let target = "/http/127.0.0.1:\(harness.origin.port)\(path)?\(query)"
        let playlist = try await harness.get(harness.url("/x/p.m3u8"))
        #expect(playlist.text.contains("\n\(target)\n"), "\(playlist.text)")
        let answer = try await RawHTTP.exchange(
            port: harness.port, Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8))
        #expect(answer.response.hasPrefix("HTTP/1.1 200"), "\(answer.response.prefix(300))")
        #expect(answer.response.hasSuffix("segment bytes"))
        #expect(harness.origin.requests(containing: "/x/[a]").map(\.path) == [path + "?" + query])
    }

    /// `…/hls/[KEY0]` as the key URI: fetched through `/keys/{id}/…` as written from an origin matching paths
    /// literally (`%5BKEY0%5D` is a 404 there), and the stream decodes frame for frame as it does from the origin.
    @Test func aKeyWithBracketsInItsPathPlaysAsFromTheOrigin() async throws {
        let made = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let harness = try await ProxyHarness.start(serving: made)
        defer { Task { await harness.shutdown() } }
        var playlist = try String(contentsOf: made.appendingPathComponent("index.m3u8"), encoding: .utf8)
        for part in 0..<3 {
            let key = made.appendingPathComponent("keys/key\(part).key")
            guard FileManager.default.fileExists(atPath: key.path) else { continue }
            playlist = playlist.replacingOccurrences(of: "URI=\"keys/key\(part).key\"", with: "URI=\"hls/[KEY\(part)]\"")
            // Only the literal path answers: no file on disk is named so, and `%5B…` finds nothing.
            harness.origin.setBody(Array(try Data(contentsOf: key)), contentType: "application/octet-stream", for: "/hls/[KEY\(part)]")
        }
        #expect(playlist.contains("URI=\"hls/[KEY0]\""))
        harness.origin.setBody(Array(playlist.utf8), for: "/bracket.m3u8")
        #expect(try await harness.get(harness.originURL("/hls/%5BKEY0%5D")).status == 404)

        let direct = try await FFmpeg.frameMD5(harness.originURL("/bracket.m3u8"))
        #expect(direct.count > 50)
        harness.origin.clearLog()
        let served = try await harness.get(harness.url("/bracket.m3u8"))
        let keyPath = try #require(served.text.firstMatch(of: /\/keys\/[0-9a-f]{32}\/http\/[^"]*/).map { String($0.output) })
        #expect(keyPath.hasSuffix("/hls/[KEY0]"), "\(keyPath)")
        let proxied = try await FFmpeg.frameMD5(harness.url("/bracket.m3u8"))
        #expect(proxied == direct)
        #expect(
            harness.origin.requests(containing: "/hls/").allSatisfy { $0.path.hasPrefix("/hls/[KEY") },
            "\(harness.origin.requests.map(\.path))")
        #expect(!harness.origin.requests(containing: "/hls/[KEY0]").isEmpty)
    }
}
