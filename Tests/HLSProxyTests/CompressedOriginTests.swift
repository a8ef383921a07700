import Foundation
import HLSCacheCore
import HLSDownloader
import HLSTestSupport
import Testing

@testable import HLSProxy

/// Origins that send `Content-Encoding: gzip` whether asked or not (objects stored gzipped on S3 and similar):
/// the proxy and the downloader parse, rewrite and cache the decoded bytes, and players get them as they are.
@Suite struct CompressedOriginTests {
    static let subtitles = Array(
        (["WEBVTT", ""]
            + (0..<200).map {
                "00:00:\(String(format: "%02d", $0 % 60)).000 --> 00:00:\(String(format: "%02d", $0 % 60)).900\nline \($0)\n"
            })
            .joined(separator: "\n").utf8)

    /// Every playlist of `dir`, as origin paths (`/master.m3u8`, `/v0/index.m3u8`, …).
    static func playlists(in dir: URL) -> [String] {
        let paths = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String } ?? []
        return paths.filter { $0.hasSuffix(".m3u8") }.map { "/" + $0 }.sorted()
    }

    static func header(_ request: TestOrigin.LoggedRequest, _ name: String) -> String? {
        request.headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    @Test func gzippedPlaylistsAndSubtitlesPlayThroughTheProxyAndAreCachedDecoded() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let direct = try await FFmpeg.frameMD5(harness.originURL("/master.m3u8"))
        #expect(direct.count > 50)

        let playlists = Self.playlists(in: dir)
        #expect(playlists.count == 4)  // master, two video renditions, audio
        for path in playlists { harness.origin.setFault(.encoded("gzip"), for: path) }
        harness.origin.clearLog()
        let proxied = try await FFmpeg.frameMD5(harness.url("/master.m3u8"))
        #expect(proxied == direct)
        // Playlists are asked for compressed, media as it is (so a Range means the file's own bytes).
        let asked = harness.origin.requests
        #expect(asked.filter { $0.path.hasSuffix(".m3u8") }.count == 4)
        for request in asked {
            let expected = request.path.hasSuffix(".m3u8") ? "gzip, deflate" : "identity"
            #expect(Self.header(request, "Accept-Encoding") == expected, "\(request.path)")
        }
        // The rewritten playlist is the decoded one, and a client that does not accept gzip gets plain text.
        let media = try await harness.get(harness.url("/v0/index.m3u8"))
        #expect(media.status == 200)
        #expect(media.headers["Content-Encoding"].isEmpty)
        #expect(media.text.hasPrefix("#EXTM3U"))
        #expect(media.text.contains("/http/127.0.0.1:\(harness.origin.port)/v0/seg000.ts"))

        // A gzipped subtitle file: the player gets the text (no Content-Encoding it did not ask for); the cache
        // holds the text, so the hit has the text's length.
        harness.origin.setBody(Self.subtitles, contentType: "text/vtt", for: "/subs/en.vtt")
        harness.origin.setFault(.encoded("gzip"), for: "/subs/en.vtt")
        let first = try await harness.get(harness.url("/subs/en.vtt"))
        #expect(first.status == 200)
        #expect(sameBytes(first.body, Self.subtitles))
        #expect(first.headers["Content-Encoding"].isEmpty)
        try await harness.waitForIdle()
        let hit = try await harness.get(harness.url("/subs/en.vtt"))
        #expect(hit.headers.first(name: "X-Cache") == "HIT")
        #expect(hit.headers.first(name: "Content-Length") == "\(Self.subtitles.count)")
        #expect(sameBytes(hit.body, Self.subtitles))
        #expect(hit.headers.first(name: "Content-Type") == "text/vtt")
        #expect(harness.origin.requests(matching: "/subs/en.vtt").count == 1)
    }

    @Test func anUnknownCodingIsA502NamingItAndNothingIsCached() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array("#EXTM3U\n#EXTINF:2,\na.ts\n#EXT-X-ENDLIST\n".utf8), for: "/br/index.m3u8")
        harness.origin.setBody([UInt8](repeating: 0x47, count: 4096), contentType: "video/mp2t", for: "/br/a.ts")
        for path in ["/br/index.m3u8", "/br/a.ts"] {
            harness.origin.setFault(.encoded("br"), for: path)
            for _ in 0..<2 {
                let response = try await harness.get(harness.url(path))
                #expect(response.status == 502, "\(path)")
                #expect(response.text.contains("\"error\":\"encoding\""), "\(path): \(response.text)")
                #expect(response.text.contains("Content-Encoding br"), "\(path): \(response.text)")
            }
            #expect(harness.origin.requests(matching: path).count == 2, "\(path): refused answers are not cached")
        }
        // hlscache_origin_errors_total counts them under their own code, not as `other`.
        try await harness.waitForIdle()
        let samples = try PrometheusText.parse(try await harness.get(harness.base + "/metrics").text).samples
        #expect(samples.value("hlscache_origin_errors_total", ["code": "encoding"]) == 4)
        #expect(samples.value("hlscache_origin_errors_total", ["code": "other"]) == 0)
    }

    /// `hlscache fetch` on the same origin: the prewarm completes, the stored playlists are the decoded text and
    /// the segments are byte-identical.
    @Test func aPrewarmOfAGzippingOriginStoresTheDecodedBytes() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let playlists = Self.playlists(in: dir)
        for path in playlists { origin.setFault(.encoded("gzip"), for: path) }
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/master.m3u8")
        #expect(item.state == .cached, "\(item.errorCode ?? "") \(item.errorMessage ?? "")")
        for path in playlists where path != "/master.m3u8" {
            let stored = try fetch.stored(path)
            let file = try [UInt8](Data(contentsOf: dir.appendingPathComponent(String(path.dropFirst()))))
            #expect(stored == file, "\(path)")
        }
        let segment = try [UInt8](Data(contentsOf: dir.appendingPathComponent("v0/seg000.ts")))
        let storedSegment = try fetch.stored("/v0/seg000.ts")
        #expect(storedSegment == segment)
        #expect(origin.requests.filter { $0.path.hasSuffix(".m3u8") }.allSatisfy { Self.header($0, "Accept-Encoding") == "gzip, deflate" })
        await fetch.shutdown()
        await origin.stop()
    }
}
