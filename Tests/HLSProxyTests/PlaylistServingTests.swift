import Foundation
import HLSPlaylist
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
            .replacingOccurrences(of: "https://cdn.elsewhere.example/v2/index.m3u8?token=abc", with: "/https/cdn.elsewhere.example/v2/index.m3u8?token=abc")
        #expect(response.text == expected)

        let gzipped = try await harness.get(harness.url("/vod/master.m3u8"), headers: [("Accept-Encoding", "gzip, deflate")])
        #expect(gzipped.headers.first(name: "Content-Encoding") == "gzip")
        #expect(Gzip.decompress(gzipped.body) == Array(expected.utf8))
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

    @Test func livePlaylistIsCachedForHalfItsTargetDurationOnly() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        // Target duration 8 s: TTL 4 s, room for a loaded machine between the first two requests.
        harness.origin.setBody(Array(Self.live(sequence: 10, targetDuration: 8).utf8), for: "/live/index.m3u8")
        let first = try await harness.get(harness.url("/live/index.m3u8"))
        #expect(first.text.contains("MEDIA-SEQUENCE:10"))
        harness.origin.setBody(Array(Self.live(sequence: 11, targetDuration: 8).utf8), for: "/live/index.m3u8")
        let cached = try await harness.get(harness.url("/live/index.m3u8"))
        #expect(cached.text.contains("MEDIA-SEQUENCE:10"), "served from memory within TTL")
        #expect(harness.origin.requests(matching: "/live/index.m3u8").count == 1)
        try await Task.sleep(for: .milliseconds(4100))  // TTL = 8 s × 0.5
        let fresh = try await harness.get(harness.url("/live/index.m3u8"))
        #expect(fresh.text.contains("MEDIA-SEQUENCE:11"), "never stale beyond half the target duration")
        #expect(harness.origin.requests(matching: "/live/index.m3u8").count == 2)
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

    @Test func malformedPlaylistIsA502NotAGarbledRewrite() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array("#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\n".utf8), for: "/bad.m3u8")
        let response = try await harness.get(harness.url("/bad.m3u8"))
        #expect(response.status == 502)
        #expect(response.text.contains("corrupted"))
        harness.origin.setBody(Array("<html>not a playlist</html>".utf8), for: "/html.m3u8")
        #expect(try await harness.get(harness.url("/html.m3u8")).status == 502)
    }
}
