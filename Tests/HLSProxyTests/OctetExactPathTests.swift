import HLSCacheCore
import HLSKeys
import HLSOrigin
import HLSPlaylist
import Testing

@testable import HLSProxy

/// Issue 41: the octets of an origin's URL reach it as the playlist wrote them, on every route — `/keys/{id}/…`
/// included. No network: the playlist is rewritten as the proxy rewrites it, each proxy URL is parsed back as the proxy
/// parses a request for it, and the request target the origin would get is compared with what the playlist wrote.
@Suite struct OctetExactPathTests {
    /// Printable characters RFC 3986 does not allow that players send as written, in a path segment and a query.
    static let awkward = "[a]|b^c`d{e}"

    /// One URI of each role with `awkward` and a Latin-1 octet (not UTF-8) in its path and query, relative and
    /// absolute; `expected` is the request target the origin must get (the octet as its escape).
    struct Entry {
        var written: [UInt8]
        var expected: String
    }

    static func entries(origin: String) -> [(role: String, entry: Entry)] {
        let latin1: [UInt8] = [0x63, 0x61, 0x66, 0xE9]  // "caf" + é in Latin-1
        func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
        return [
            (
                "segment",
                Entry(
                    written: bytes("seg\(awkward)") + latin1 + bytes(".ts?q=\(awkward)&n=") + latin1,
                    expected: "/vod/seg\(awkward)caf%E9.ts?q=\(awkward)&n=caf%E9")
            ),
            (
                "key",
                Entry(
                    written: bytes("\(origin)/hls/[KEY]|^`{k}?t=\(awkward)&n=") + latin1, expected: "/hls/[KEY]|^`{k}?t=\(awkward)&n=caf%E9"
                )
            ),
            (
                "map",
                Entry(
                    written: bytes("init\(awkward)") + latin1 + bytes(".mp4?m=\(awkward)"),
                    expected: "/vod/init\(awkward)caf%E9.mp4?m=\(awkward)")
            ),
            (
                "segment",
                Entry(written: bytes("/abs/") + latin1 + bytes("/[1]{2}.ts?x=") + latin1, expected: "/abs/caf%E9/[1]{2}.ts?x=caf%E9")
            ),
        ]
    }

    static func rewriter() -> ProxyPathRewriter {
        ProxyPathRewriter(keyRewrite: { resolved, _, _ in
            guard let url = try? OriginURL(resolved) else { return nil }
            return KeyID(CacheKey(url, volatileParameters: [])).path(for: url)
        })
    }

    /// The origin URL a served URI leads to, as the proxy reads a request for it (`/keys/{id}` taken off first).
    static func originURL(ofServed uri: String) throws -> OriginURL {
        var target = Substring(uri)
        if target.hasPrefix("/keys/") {
            let afterKeys = target.dropFirst("/keys/".count)
            target = afterKeys[try #require(afterKeys.firstIndex(of: "/"))...]
        }
        return try OriginURL(proxyTarget: String(target))
    }

    static func target(_ url: OriginURL) -> String { url.path + (url.query.map { "?" + $0 } ?? "") }

    @Test func mediaPlaylistURIsReachTheOriginAsWritten() throws {
        let origin = "http://cdn.example:8081"
        let entries = Self.entries(origin: origin)
        var text: [UInt8] = Array("#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:2\n".utf8)
        text += Array("#EXT-X-MAP:URI=\"".utf8) + entries[2].entry.written + Array("\"\n".utf8)
        text += Array("#EXT-X-KEY:METHOD=AES-128,URI=\"".utf8) + entries[1].entry.written + Array("\"\n".utf8)
        text += Array("#EXTINF:2,\n".utf8) + entries[0].entry.written + [0x0A]
        text += Array("#EXTINF:2,\n".utf8) + entries[3].entry.written + [0x0A]
        text += Array("#EXT-X-ENDLIST\n".utf8)
        let playlist = try Playlist(bytes: text, options: ParseOptions(tolerant: true))
        let rewritten = try playlist.rewrite(baseURL: origin + "/vod/index.m3u8", keepingUnresolved: true, using: Self.rewriter())
        let served = try Playlist(bytes: rewritten, options: ParseOptions(tolerant: true))
        let uris = served.uriSlots.map { served.rawValue(of: $0) }
        #expect(uris.count == 4)
        // In document order: map, key, segment, segment.
        let expected = [entries[2], entries[1], entries[0], entries[3]].map(\.entry.expected)
        for (uri, want) in zip(uris, expected) {
            let url = try Self.originURL(ofServed: uri)
            #expect(Self.target(url) == want, "\(uri)")
            #expect(url.authority == "cdn.example:8081")
            // Foundation's URL would escape these: such a request goes out as written on a raw exchange.
            #expect(OriginClient.needsRawExchange(url), "\(uri)")
        }
        #expect(uris[1].hasPrefix("/keys/"), "the key goes through the key store")
    }

    @Test func multivariantAndChannelURIsReachTheOriginAsWritten() throws {
        let latin1: [UInt8] = [0x74, 0xE9, 0x6C, 0xE9]  // "télé" in Latin-1
        var text: [UInt8] = Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\n".utf8)
        text += Array("v\(Self.awkward)/".utf8) + latin1 + Array(".m3u8?v=\(Self.awkward)".utf8) + [0x0A]
        text += Array("#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"x\",URI=\"a{1}/[x].m3u8?^=`\"\n".utf8)
        let playlist = try Playlist(bytes: text, options: ParseOptions(tolerant: true))
        let rewritten = try playlist.rewrite(baseURL: "https://cdn.example/live/master.m3u8", using: Self.rewriter())
        let served = try Playlist(bytes: rewritten, options: ParseOptions(tolerant: true))
        let targets = try served.uriSlots.map { try Self.target(Self.originURL(ofServed: served.rawValue(of: $0))) }
        #expect(targets == ["/live/v\(Self.awkward)/t%E9l%E9.m3u8?v=\(Self.awkward)", "/live/a{1}/[x].m3u8?^=`"])

        // A channel list's URL (before Kodi's `|` header suffix) likewise.
        let list: [UInt8] =
            Array("#EXTM3U\n#EXTINF:-1 tvg-id=\"x\",X\nhttp://tv.example/ch/[1]/".utf8) + latin1
            + Array(".m3u8?k={v}|User-Agent=Kodi%2F20\n".utf8)
        let channels = try Playlist(bytes: list, options: ParseOptions(tolerant: true))
        let served2 = try channels.rewrite(baseURL: "http://tv.example/list.m3u", using: Self.rewriter())
        let text2 = String(decoding: served2, as: UTF8.self)
        #expect(text2.hasSuffix("\n/http/tv.example/ch/[1]/t%E9l%E9.m3u8?k={v}|User-Agent=Kodi%2F20\n"), "\(text2)")
        #expect(try channels.channels().first?.httpHeaders.map(\.value) == ["Kodi/20"])
    }

    @Test func aPlayersRequestForTheSameURLParsesToTheSameOriginTarget() throws {
        // What ffmpeg, VLC and mpv send for the served URIs (as written), and a browser's escapes of `{`, `}`, `` ` ``:
        // the proxy forwards each as it came.
        for (target, want) in [
            ("/http/h/hls/[KEY]", "/hls/[KEY]"), ("/http/h/a|b^c.ts?x=[1]", "/a|b^c.ts?x=[1]"), ("/http/h/%7Bx%7D%60.ts", "/%7Bx%7D%60.ts"),
            ("/http/h/caf%E9.ts?n=%FF", "/caf%E9.ts?n=%FF"),
        ] {
            #expect(Self.target(try OriginURL(proxyTarget: target)) == want, "\(target)")
        }
        // Still escaped: what no request line can carry as written.
        #expect(Self.target(try OriginURL("http://h/a b\"<>.ts")) == "/a%20b%22%3C%3E.ts")
    }
}
