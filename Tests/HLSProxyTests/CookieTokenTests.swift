import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HLSCacheCore
import HLSDownloader
import HLSTestSupport
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
        // (Refused, it was asked again once: the proxy had read no multivariant playlist of that origin to get a cookie from.)
        #expect(
            Set(sentWithoutToken.map(\.path)) == ["/v0/index.m3u8"], "only the request made before the master playlist lacked the token")
    }

    /// A stream prewarmed by `hlscache fetch` (its first 2 seconds), then played through `hlscache serve` (real
    /// binaries, two processes): the playlists are hits, so `serve` never got the cookie the CDN sets on the
    /// multivariant playlist, and the segments past the prewarmed part were refused with 403. `serve` now fetches
    /// the item's playlist for the cookie when the origin refuses, once, and the stream plays to the end.
    @Test func aPrewarmedStreamPlaysPastItsPrewarmedPartThroughServe() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        origin.cookieGate.withLockedValue { $0 = ("/master.m3u8", Self.token) }
        let direct = try await FFmpeg.frameMD5(origin.baseURL + "/master.m3u8")
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cookie-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let fetched = try await ServeShutdownTests.run([
            "fetch", origin.baseURL + "/master.m3u8", "--seconds", "2", "--cache-dir", cache.path, "--free-disk-cushion", "0",
        ])
        #expect(fetched.status == 0, "\(fetched.stdout)")

        let log = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cookie-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        func get(_ url: String, _ path: String, expecting cache: String) async throws {
            let (body, response) = try await URLSession.shared.data(from: URL(string: url + path)!)
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200, "\(path): \(String(decoding: body.prefix(200), as: UTF8.self))")
            #expect(http.value(forHTTPHeaderField: "X-Cache") == cache, "\(path)")
            if path.hasSuffix(".ts") { #expect(body == (try Data(contentsOf: dir.appendingPathComponent(String(path.dropFirst()))))) }
        }

        // The first serve reads the stored multivariant playlist (its first hit makes the rewritten copy): a refused
        // segment gets its cookie from that playlist.
        var (serve, base) = try await ServeShutdownTests.serve(cache: cache, extra: [], stderr: log)
        origin.clearLog()
        var proxied = "\(base)/http/127.0.0.1:\(origin.port)"
        try await get(proxied, "/master.m3u8", expecting: "HIT")
        try await get(proxied, "/v0/seg003.ts", expecting: "MISS")
        #expect(origin.requests.map(\.path) == ["/v0/seg003.ts", "/master.m3u8", "/v0/seg003.ts"])
        serve.terminate()
        await serve.waitForExit()

        // The next serve sends the rewritten copy without reading it: the cookie comes from the playlist of the item
        // the refused segment belongs to (not listed by it: past the prewarmed part; same origin).
        (serve, base) = try await ServeShutdownTests.serve(cache: cache, extra: [], stderr: log)
        defer { if serve.isRunning { serve.terminate() } }
        origin.clearLog()
        proxied = "\(base)/http/127.0.0.1:\(origin.port)"
        try await get(proxied, "/master.m3u8", expecting: "HIT")
        try await get(proxied, "/v1/seg003.ts", expecting: "MISS")
        #expect(origin.requests.map(\.path) == ["/v1/seg003.ts", "/master.m3u8", "/v1/seg003.ts"])
        // A player decodes the whole stream through serve, past the prewarmed part.
        #expect(try await FFmpeg.frameMD5(proxied + "/master.m3u8") == direct)
        serve.terminate()
        await serve.waitForExit()
    }

    /// A protected stream prewarmed whole from such a CDN, its keys past their TTL when `serve` plays it: the renewal
    /// of each key is refused without the cookie, which `serve` then gets from the item's playlist (a media playlist
    /// here), and the stream decodes through serve as it does from the origin.
    @Test func keysOfAPrewarmedStreamAreRenewedFromACookieGatedOrigin() async throws {
        let dir = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        origin.cookieGate.withLockedValue { $0 = ("/index.m3u8", Self.token) }
        let direct = try await FFmpeg.frameMD5(origin.baseURL + "/index.m3u8")
        #expect(direct.count > 50)
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cookie-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        let config = cache.appendingPathComponent("short-keys.yaml")
        try "keys:\n  ttl: 1s\n".write(to: config, atomically: true, encoding: .utf8)
        let fetched = try await ServeShutdownTests.run([
            "fetch", origin.baseURL + "/index.m3u8", "--cache-dir", cache.path, "--free-disk-cushion", "0", "--config", config.path,
        ])
        #expect(fetched.status == 0, "\(fetched.stdout)")
        try await Task.sleep(for: .milliseconds(1500))  // the stored keys are past their TTL

        let log = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cookie-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        let (serve, base) = try await ServeShutdownTests.serve(cache: cache, extra: [], stderr: log)
        defer { if serve.isRunning { serve.terminate() } }
        origin.clearLog()
        #expect(try await FFmpeg.frameMD5("\(base)/http/127.0.0.1:\(origin.port)/index.m3u8") == direct)
        let keyRequests = origin.requests.filter { $0.path.hasSuffix(".key") }
        #expect(!keyRequests.isEmpty, "the keys were renewed")
        #expect(origin.requests.filter { $0.path.hasSuffix(".ts") }.isEmpty, "the segments were hits")
        #expect(origin.requests.filter { $0.path == "/index.m3u8" }.count == 1, "\(origin.requests.map(\.path))")
        serve.terminate()
        await serve.waitForExit()
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
