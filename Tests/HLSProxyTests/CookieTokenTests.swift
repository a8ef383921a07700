import Foundation
import HLSCacheCore
import HLSDownloader
import Testing

@testable import HLSProxy

/// A CDN that sets its access token as a cookie on the multivariant playlist and refuses everything else without
/// it (Akamai's `hdntl`): players keep such cookies, so hlscache must, or every variant is a 403.
@Suite struct CookieTokenTests {
    static let token = "hdntl=exp=1999999999~acl=%2f*~hmac=0a1b2c"

    @Test func aTokenCookieSetOnTheMasterPlaylistOpensTheRestOfTheStream() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        harness.origin.cookieGate.withLockedValue { $0 = ("/master.m3u8", Self.token) }
        // ffmpeg keeps the cookie itself when it reads from the origin directly.
        let direct = try await FFmpeg.frameMD5(harness.originURL("/master.m3u8"))
        #expect(direct.count > 50)
        harness.origin.clearLog()

        // Without the master playlist first, the origin refuses; the proxy says so.
        let refused = try await harness.get(harness.url("/v0/index.m3u8"))
        #expect(refused.status == 403)
        let proxied = try await FFmpeg.frameMD5(harness.url("/master.m3u8"))
        #expect(proxied == direct)
        let sentWithoutToken = harness.origin.requests.filter { request in
            request.path != "/master.m3u8" && !request.headers.contains { $0.0.lowercased() == "cookie" && $0.1.contains(Self.token) }
        }
        #expect(sentWithoutToken.map(\.path) == ["/v0/index.m3u8"], "only the request made before the master playlist lacked the token")
    }

    @Test func aPrewarmCarriesTheTokenCookieToEverySegment() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        origin.cookieGate.withLockedValue { $0 = ("/master.m3u8", Self.token) }
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/master.m3u8", seconds: 4)
        #expect(item.state == .partiallyCached, "\(item.errorCode ?? "") \(item.errorMessage ?? "")")
        #expect(item.errorCode == nil)
        #expect(origin.requests.count > 5)
        let segment = try [UInt8](Data(contentsOf: dir.appendingPathComponent("v0/seg000.ts")))
        #expect(try fetch.stored("/v0/seg000.ts") == segment)
        await fetch.shutdown(keepingCache: true)

        // The whole stream, in a new process (no cookies yet) that reads the stored playlists.
        let later = try DownloaderHarness(origin: origin, cacheDirectory: fetch.cacheDirectory)
        defer { Task { await later.shutdown() } }
        origin.clearLog()
        let done = try await later.fetch("/master.m3u8", seconds: 0)
        #expect(done.state == .cached, "\(done.errorCode ?? "") \(done.errorMessage ?? "")")
        #expect(origin.requests.filter { $0.path.hasSuffix(".m3u8") }.map(\.path) == ["/master.m3u8"], "the stored playlists were used")
        let last = try [UInt8](Data(contentsOf: dir.appendingPathComponent("v0/seg003.ts")))
        #expect(try later.stored("/v0/seg003.ts") == last)
        await later.shutdown()
        await origin.stop()
    }
}
