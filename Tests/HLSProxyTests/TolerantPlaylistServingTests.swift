import Foundation
import HLSCacheCore
import HLSPlaylist
import HLSTestSupport
import Testing

@testable import HLSProxy

/// The serve path reads playlists as players do (issue 31): a playlist that departs from RFC 8216 in a way players
/// tolerate is served (200), its URIs through the proxy and every other byte as the origin sent it, with a warning
/// counted by kind; `playlists.strict` keeps the refusal (502 corrupted, naming the line). What is no playlist at
/// all is refused either way.
@Suite struct TolerantPlaylistServingTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var text: String
        /// Spellings of URIs as written → what the proxy must write instead (`{proxy}` = `/http/127.0.0.1:PORT`).
        var replacements: [(String, String)]
        var kind: PlaylistWarning.Kind
        var strictLine: Int
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "decimal TARGETDURATION", text: "#EXTM3U\n#EXT-X-TARGETDURATION:2.5\n#EXTINF:2.5,\na.ts\n#EXT-X-ENDLIST\n",
            replacements: [("\na.ts", "\n{proxy}/t/a.ts")], kind: .decimalInteger, strictLine: 2),
        Case(
            name: "decimal BANDWIDTH",
            text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000.0,RESOLUTION=640x360\nv1/index.m3u8\n",
            replacements: [("\nv1/", "\n{proxy}/t/v1/")], kind: .decimalInteger, strictLine: 2),
        Case(
            name: "dangling EXTINF", text: "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6.0,\na.ts\n#EXTINF:6.0,\n",
            replacements: [("\na.ts", "\n{proxy}/t/a.ts")], kind: .danglingTag, strictLine: 5),
        Case(
            name: "IPTV channel list",
            text: """
                #EXTM3U
                #EXTINF:-1 tvg-id="one" tvg-logo="http://logos.example/one.png" group-title="News",Channel One
                #EXTVLCOPT:http-user-agent=Mozilla/5.0
                http://iptv.example/live/one/index.m3u8
                #EXTINF:-1 tvg-id="two",Channel Two
                #EXTGRP:Sport
                http://iptv.example:8000/live/user/pass/1234.ts

                """,
            replacements: [
                // A channel list gets absolute URLs (issue 41).
                ("\nhttp://iptv.example/", "\n{base}/http/iptv.example/"),
                ("\nhttp://iptv.example:8000/", "\n{base}/http/iptv.example:8000/"),
            ], kind: .channelList, strictLine: 2),
        Case(
            name: "duration followed by attributes", text: "#EXTM3U\n#EXTINF:10.000 tvg-id=\"BBC\",BBC One\nbbc.ts\n#EXT-X-ENDLIST\n",
            replacements: [("\nbbc.ts", "\n{proxy}/t/bbc.ts")], kind: .durationWithAttributes, strictLine: 2),
        Case(
            name: "negative MEDIA-SEQUENCE", text: "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:-3\n#EXTINF:2,\na.ts\n",
            replacements: [("\na.ts", "\n{proxy}/t/a.ts")], kind: .negativeNumber, strictLine: 3),
        Case(
            name: "EXT-X-MAP without URI",
            text: "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:BYTERANGE=\"10@0\"\n#EXTINF:2,\na.m4s\n#EXT-X-ENDLIST\n",
            replacements: [("\na.m4s", "\n{proxy}/t/a.m4s")], kind: .missingAttribute, strictLine: 3),
        Case(
            name: "URI lines without EXTINF", text: "#EXTM3U\nhttp://a.example/one.m3u8\n",
            replacements: [("\nhttp://a.example/", "\n/http/a.example/")], kind: .uriWithoutTag, strictLine: 2),
        Case(
            name: "whitespace before #EXTM3U", text: "\n\n#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\na.ts\n#EXT-X-ENDLIST\n",
            replacements: [("\na.ts", "\n{proxy}/t/a.ts")], kind: .leadingWhitespace, strictLine: 1),
        Case(
            name: "unterminated quote",
            text: "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PROGRAM-DATE-TIME:x\n#EXT-X-DATERANGE:ID=\"a\n#EXTINF:2,\na.ts\n",
            replacements: [("\na.ts", "\n{proxy}/t/a.ts")], kind: .malformedAttributes, strictLine: 4),
    ]

    static func metric(_ harness: ProxyHarness, kind: PlaylistWarning.Kind) async throws -> Double? {
        let samples = try PrometheusText.parse(try await harness.get(harness.base + "/metrics").text).samples
        return samples.value("hlscache_playlist_warnings_total", ["kind": kind.rawValue])
    }

    @Test(arguments: cases)
    func aToleratedDepartureIsServedAndCounted(_ c: Case) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array(c.text.utf8), for: "/t/p.m3u8")
        let response = try await harness.get(harness.url("/t/p.m3u8"))
        #expect(response.status == 200, "\(response.text)")
        var expected = c.text
        for (from, to) in c.replacements {
            #expect(expected.contains(from), "fixture: \(from)")
            expected = expected.replacingOccurrences(
                of: from,
                with: to.replacingOccurrences(of: "{proxy}", with: "/http/127.0.0.1:\(harness.origin.port)")
                    .replacingOccurrences(of: "{base}", with: harness.base))
        }
        #expect(response.text == expected)
        #expect(try await Self.metric(harness, kind: c.kind) == 1)
        // A second reading of the same URL (live: from the origin again) is not a new warning.
        _ = try await harness.get(harness.url("/t/p.m3u8"))
        #expect(try await Self.metric(harness, kind: c.kind) == 1)
    }

    @Test(arguments: cases)
    func strictKeepsTheRefusal(_ c: Case) async throws {
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory, configure: { $0.strictPlaylists = true })
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array(c.text.utf8), for: "/t/p.m3u8")
        let response = try await harness.get(harness.url("/t/p.m3u8"))
        #expect(response.status == 502)
        #expect(response.text.contains("\"error\":\"corrupted\""), "\(response.text)")
        #expect(response.text.contains("line \(c.strictLine)"), "\(response.text)")
    }

    @Test(arguments: [
        ("html", "<!DOCTYPE html>\n<html><body>#EXTM3U</body></html>\n"), ("empty", ""), ("binary", "\u{0}\u{1}GIF89a\u{2}"),
        ("noheader", "#EXTINF:2,\na.ts\n"),
    ])
    func whatIsNoPlaylistIsRefused(name: String, text: String) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array(text.utf8), for: "/t/\(name).m3u8")
        let response = try await harness.get(harness.url("/t/\(name).m3u8"))
        #expect(response.status == 502, "\(name)")
        #expect(response.text.contains("\"error\":\"corrupted\""), "\(name): \(response.text)")
        #expect(response.text.contains("line 1"), "\(name): \(response.text)")
    }

    /// A playlist whose type and path do not say so, with blank lines before `#EXTM3U`: still recognised by its first
    /// bytes and rewritten, not relayed as media.
    @Test func blankLinesBeforeTheHeaderOfAPlaylistOfAGenericType() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let text = "\r\n\n#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\na.ts\n#EXT-X-ENDLIST\n"
        harness.origin.setBody(Array(text.utf8), contentType: "text/plain", for: "/t/play")
        let response = try await harness.get(harness.url("/t/play"))
        #expect(response.status == 200)
        #expect(response.text == text.replacingOccurrences(of: "\na.ts", with: "\n/http/127.0.0.1:\(harness.origin.port)/t/a.ts"))
    }

    @Test func overTheSizeCapIsRefused() async throws {
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory, configure: { $0.maxPlaylistBytes = 1024 })
        defer { Task { await harness.shutdown() } }
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2.5\n" + String(repeating: "#EXTINF:2,\na.ts\n", count: 100)
        harness.origin.setBody(Array(text.utf8), for: "/t/big.m3u8")
        #expect(try await harness.get(harness.url("/t/big.m3u8")).status == 502)
    }

    /// EXT-X-SESSION-KEY in a media playlist: still a key, registered and pointed at /keys/.
    @Test func aSessionKeyInAMediaPlaylistGoesThroughKeys() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let keyURL = "http://127.0.0.1:\(harness.origin.port)/k/key.bin"
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-SESSION-KEY:METHOD=AES-128,URI="\(keyURL)"
            #EXT-X-KEY:METHOD=AES-128,URI="\(keyURL)"
            #EXTINF:2,
            a.ts
            #EXT-X-ENDLIST

            """
        harness.origin.setBody(Array(text.utf8), for: "/t/p.m3u8")
        let response = try await harness.get(harness.url("/t/p.m3u8"))
        #expect(response.status == 200, "\(response.text)")
        #expect(!response.text.contains(keyURL))
        #expect(response.text.components(separatedBy: "URI=\"/keys/").count == 3, "\(response.text)")
        #expect(try await Self.metric(harness, kind: .misplacedTag) == 1)
    }

    /// `IV=0x…{$two}`: a variable inside a hexadecimal sequence is valid HLS, served by both readers.
    @Test(arguments: [false, true])
    func aVariableInsideAnIVIsServed(strict: Bool) async throws {
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory, configure: { $0.strictPlaylists = strict })
        defer { Task { await harness.shutdown() } }
        let text = """
            #EXTM3U
            #EXT-X-DEFINE:NAME="two",VALUE="02"
            #EXT-X-TARGETDURATION:2
            #EXT-X-KEY:METHOD=AES-128,URI="k.bin",IV=0x000000000000000000000000000000{$two}
            #EXTINF:2,
            a.ts
            #EXT-X-ENDLIST

            """
        harness.origin.setBody(Array(text.utf8), for: "/t/p.m3u8")
        let response = try await harness.get(harness.url("/t/p.m3u8"))
        #expect(response.status == 200, "\(response.text)")
        #expect(response.text.contains("IV=0x000000000000000000000000000000{$two}\n"))
        #expect(response.text.contains("URI=\"/keys/"))
    }

    /// ffmpeg plays, through the proxy, a stream whose playlists carry a decimal BANDWIDTH and TARGETDURATION, a
    /// dangling EXTINF and an EXT-X-SESSION-KEY in a media playlist: the same frames as straight from the origin.
    @Test func ffmpegPlaysAStreamWithTolerances() async throws {
        let made = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-tolerant-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: made, to: dir)
        defer { try? FileManager.default.removeItem(at: dir) }
        let master = dir.appendingPathComponent("master.m3u8")
        var text = try String(contentsOf: master, encoding: .utf8)
        let bandwidth = try #require(text.range(of: #"BANDWIDTH=\d+"#, options: .regularExpression))
        text.replaceSubrange(bandwidth, with: text[bandwidth] + ".0")
        try text.write(to: master, atomically: true, encoding: .utf8)
        for variant in ["v0", "v1", "venglish"] {
            let url = dir.appendingPathComponent("\(variant)/index.m3u8")
            guard var media = try? String(contentsOf: url, encoding: .utf8) else { continue }
            media = media.replacingOccurrences(
                of: #"#EXT-X-TARGETDURATION:(\d+)"#, with: "#EXT-X-TARGETDURATION:$1.5", options: .regularExpression)
            media = media.replacingOccurrences(
                of: "#EXT-X-TARGETDURATION",
                with: "#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"https://keys.invalid/none\"\n#EXT-X-TARGETDURATION")
            media = media.replacingOccurrences(of: "#EXT-X-ENDLIST", with: "#EXTINF:2.0,\n#EXT-X-ENDLIST")
            try media.write(to: url, atomically: true, encoding: .utf8)
        }
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let direct = try await FFmpeg.frameMD5(harness.originURL("/master.m3u8"))
        let proxied = try await FFmpeg.frameMD5(harness.url("/master.m3u8"))
        #expect(!proxied.isEmpty)
        #expect(proxied == direct)
        #expect(try await Self.metric(harness, kind: .decimalInteger) ?? 0 >= 2)
        #expect(try await Self.metric(harness, kind: .danglingTag) ?? 0 >= 1)
        #expect(try await Self.metric(harness, kind: .misplacedTag) ?? 0 >= 1)
        #expect(harness.origin.requests(containing: ".ts").count > 0)
    }
}
