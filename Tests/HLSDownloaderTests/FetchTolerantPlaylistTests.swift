import Foundation
import HLSCacheCore
import HLSDownloader
import HLSTestSupport
import Testing

/// `hlscache fetch` reads playlists with the tolerant reader too (issue 31): what players play is prewarmed,
/// and where the first N seconds cannot be computed the error names the line.
@Suite struct FetchTolerantPlaylistTests {
    static func origin(_ bodies: [String: String]) async throws -> TestOrigin {
        let origin = TestOrigin(root: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        try await origin.start()
        for (path, text) in bodies { origin.setBody(Array(text.utf8), for: path) }
        for name in ["a", "b", "c"] { origin.setBody(Array(repeating: 0x47, count: 1880), contentType: "video/mp2t", for: "/v/\(name).ts") }
        return origin
    }

    @Test func aPlaylistWithTolerancesIsPrewarmed() async throws {
        let origin = try await Self.origin([
            "/master.m3u8": "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000.0\nv/index.m3u8\n",
            "/v/index.m3u8":
                "#EXTM3U\n#EXT-X-TARGETDURATION:2.5\n#EXT-X-MEDIA-SEQUENCE:-1\n#EXTINF:2.5,\na.ts\n#EXTINF:2.5 tvg-id=\"x\",\nb.ts\n#EXTINF:2.5,\nc.ts\n#EXTINF:2.5,\n#EXT-X-ENDLIST\n",
        ])
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/master.m3u8", id: "tolerant", seconds: 4)
        #expect(item.state == .partiallyCached, "\(item.errorCode ?? "") \(item.errorMessage ?? "")")
        #expect(try fetch.stored("/v/a.ts") != nil)
        #expect(try fetch.stored("/v/b.ts") != nil)
        #expect(try fetch.stored("/v/c.ts") == nil, "starts at 5 s: after the first 4")
    }

    @Test func theFirstSecondsOfAPlaylistWithoutDurationsAreNotGuessed() async throws {
        let origin = try await Self.origin([
            "/v/index.m3u8": "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\na.ts\n#EXTINF:abc,\nb.ts\n#EXTINF:2,\nc.ts\n#EXT-X-ENDLIST\n"
        ])
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/v/index.m3u8", id: "no-durations", seconds: 4)
        #expect(item.state == .failed)
        #expect(item.errorMessage?.contains("the segment at line 6 has no usable duration") == true, "\(item.errorMessage ?? "")")
        // The whole stream needs no durations.
        let whole = try await fetch.fetch("/v/index.m3u8", id: "whole", seconds: 0)
        #expect(whole.state == .cached, "\(whole.errorCode ?? "") \(whole.errorMessage ?? "")")
    }

    @Test func aChannelListIsNotAStreamToFetch() async throws {
        let origin = try await Self.origin(["/tv.m3u": "#EXTM3U\n#EXTINF:-1 tvg-id=\"one\",One\nhttp://127.0.0.1:1/one.m3u8\n"])
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/tv.m3u", id: "channels")
        #expect(item.state == .failed)
        #expect(item.errorMessage?.contains("channel list") == true, "\(item.errorMessage ?? "")")
    }
}
