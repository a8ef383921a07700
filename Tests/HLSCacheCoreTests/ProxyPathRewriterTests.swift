import Foundation
import HLSCacheCore
import HLSPlaylist
import Testing

/// The directory fast path must give exactly what calling the rewriter for every URI gives.
@Suite struct ProxyPathRewriterTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../HLSPlaylistTests/Fixtures")

    static var fixtureNames: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: fixtures.path)) ?? []).filter { $0.hasSuffix(".m3u8") }.sorted()
    }

    static let handWritten = [
        "#EXTM3U\n#EXTINF:2,\nseg1.ts\n#EXTINF:2,\nsub/dir/seg2.ts?x=1&y=2\n#EXTINF:2,\n../up.ts\n#EXTINF:2,\n./here.ts\n#EXTINF:2,\nsp ace.ts\n",
        "#EXTM3U\n#EXTINF:2,\n/abs/seg.ts\n#EXTINF:2,\n//other.example/s.ts\n#EXTINF:2,\nhttps://cdn.example/x.ts\n#EXTINF:2,\nseg.ts#frag\n",
        "#EXTM3U\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"key.bin\"\n#EXTINF:2,\né.ts\n#EXTINF:2,\na:b.ts\n#EXTINF:2,\n%41.ts\n",
        "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv/index.m3u8\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"n\",URI=\"a/..\"\n",
    ]

    func check(_ text: String, base: String) throws {
        let playlist = try Playlist(text)
        let rewriter = ProxyPathRewriter()
        let fast = try playlist.rewrite(baseURL: base, using: rewriter)
        let slow = try playlist.rewrite(baseURL: base) { url, role in try rewriter.rewrite(url, role: role) }
        #expect(String(decoding: fast, as: UTF8.self) == String(decoding: slow, as: UTF8.self))
    }

    /// The cases below come from a directory listing: one that found nothing would run no case and pass.
    @Test func theFixturesAreFound() {
        #expect(Self.fixtureNames.count >= 10, "\(Self.fixtureNames) in \(Self.fixtures.path)")
    }

    @Test(arguments: fixtureNames)
    func fixtures(_ name: String) throws {
        let text = try String(contentsOf: Self.fixtures.appendingPathComponent(name), encoding: .utf8)
        try check(text, base: "https://cdn.example.com/vod/movie/\(name)?token=abc")
    }

    @Test(arguments: handWritten)
    func edgeCases(_ text: String) throws {
        try check(text, base: "http://127.0.0.1:8081/a/b/index.m3u8")
    }

    @Test func keysAreLeftToTheKeyRewrite() throws {
        let playlist = try Playlist("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k.bin\"\n#EXTINF:2,\ns.ts\n")
        let out = try playlist.rewrite(baseURL: "https://h/v/i.m3u8", using: ProxyPathRewriter(keyRewrite: { _, _, _ in "/keys/abc" }))
        #expect(
            String(decoding: out, as: UTF8.self) == "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"/keys/abc\"\n#EXTINF:2,\n/https/h/v/s.ts\n")
    }
}

/// `fetch --through`: a playlist another hlscache served is read back with the origin's URLs.
@Suite struct ServedPathRewriterTests {
    @Test func proxyPathsAndKeyPathsBecomeOriginURLsAgain() throws {
        let served = """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-KEY:METHOD=AES-128,URI="/keys/0123456789abcdef0123456789abcdef/https/cdn.example.com/k/1.key?token=a",IV=0x01
            #EXTINF:2,
            /https/cdn.example.com/vod/v0/seg000.ts?token=a
            #EXTINF:2,
            https://elsewhere.example/seg001.ts
            #EXT-X-ENDLIST

            """
        let playlist = try Playlist(bytes: Array(served.utf8))
        let out = try playlist.rewrite(
            baseURL: "http://127.0.0.1:8080/https/cdn.example.com/vod/v0/index.m3u8",
            using: ServedPathRewriter(server: "http://127.0.0.1:8080/"))
        #expect(
            String(decoding: out, as: UTF8.self) == """
                #EXTM3U
                #EXT-X-TARGETDURATION:2
                #EXT-X-KEY:METHOD=AES-128,URI="https://cdn.example.com/k/1.key?token=a",IV=0x01
                #EXTINF:2,
                https://cdn.example.com/vod/v0/seg000.ts?token=a
                #EXTINF:2,
                https://elsewhere.example/seg001.ts
                #EXT-X-ENDLIST

                """)
    }
}
