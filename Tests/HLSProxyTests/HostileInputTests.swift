import Foundation
import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSTestSupport
import Testing

@testable import HLSProxy

/// Hostile requests and hostile origins (docs/reliability.md, "Hostile input"; docs/threat-model.md): path
/// traversal, SSRF, request smuggling shapes, oversized playlists and playlist loops. What ProtocolTests already
/// covers (dot segments, 431, a huge header, CL+TE, slowloris) is not repeated here.
@Suite struct HostileInputTests {
    static func emptyOrigin() -> URL { FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none") }

    static func statuses(_ response: String) -> [String] {
        RawHTTP.statuses(response)
    }

    // MARK: Path traversal

    /// Traversal shapes under `/keys/`: never the master key, never a file, always a 404 or 400.
    @Test(arguments: [
        "/keys/../master.key", "/keys/%2e%2e/master.key", "/keys/..%2fmaster.key", "/keys/%2e%2e%2fmaster.key", "/keys/..%5cmaster.key",
        "/keys/0123456789abcdef0123456789abcdef/../../master.key", "/keys/0123456789abcdef0123456789abcdef%00", "/keys/",
        "/keys/0123456789ABCDEF0123456789ABCDEF0", "/keys/master.key", "/keys/../keys.sqlite",
    ])
    func keyPathTraversalNeverReachesAFile(_ target: String) async throws {
        let harness = try await ProxyHarness.start(serving: Self.emptyOrigin())
        let master = [UInt8](try Data(contentsOf: harness.cacheDirectory.appendingPathComponent("master.key")))
        let (response, _) = try await RawHTTP.exchange(
            port: harness.port, Array("GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), readTimeout: 60)
        #expect(response.hasPrefix("HTTP/1.1 404") || response.hasPrefix("HTTP/1.1 400"), "\(target) → \(response.prefix(40))")
        let body = Array(response.utf8)
        #expect(!body.containsSubsequence(master), "the master key was served")
        #expect(!response.contains("SQLite format"))
        #expect(harness.origin.requests.isEmpty)
        await harness.shutdown()
    }

    /// Encoded slashes and encoded dots inside a segment are data, not structure: the origin receives them as
    /// sent (still encoded), so nothing is normalised into a different path on the way.
    @Test(arguments: ["/dir/a%2f..%2fsecret.ts", "/dir/%2e%2e%2fsecret.ts", "/dir/a%252e%252e/secret.ts", "/dir/x%5c..%5csecret.ts"])
    func encodedSeparatorsReachTheOriginUnchanged(_ path: String) async throws {
        let harness = try await ProxyHarness.start(serving: Self.emptyOrigin())
        let response = try await harness.get(harness.url(path))
        #expect(response.status == 404 || response.status == 400)
        for request in harness.origin.requests {
            #expect(request.path == path, "the origin was asked for \(request.path)")
        }
        await harness.shutdown()
    }

    // MARK: SSRF

    /// Link-local, metadata and other spellings of the metadata address are refused before any connection is
    /// made (403 or 400 — a 502/504 would mean the proxy tried to connect).
    @Test(arguments: [
        "/http/169.254.169.254/latest/meta-data/", "/http/169.254.1.1/x.ts", "/http/[fe80::1]/x.ts", "/http/[::ffff:169.254.169.254]/x.ts",
        "/http/2852039166/latest/meta-data/", "/http/0xa9fea9fe/latest/meta-data/", "/http/169.254.169.254.nip.io.invalid/x",
        "/http/0.0.0.0/x.ts",
        "/http/[::]/x.ts", "/http/metadata.google.internal/computeMetadata/v1/",
    ])
    func metadataAndLinkLocalAreRefusedWithoutConnecting(_ target: String) async throws {
        let harness = try await ProxyHarness.start(serving: Self.emptyOrigin())
        let response = try await harness.get(harness.base + target)
        // An unresolvable name (the last ones, in a sandbox) is a 502 "network" without a connection; every
        // address that resolves into a forbidden range must be a 403.
        if response.status == 502 && (target.contains(".invalid/") || target.contains(".internal/")) {
            #expect(response.text.contains("\"error\":\"network\""), "\(target) → \(response.text)")
        } else {
            #expect(response.status == 403 || response.status == 400, "\(target) → \(response.status) \(response.text)")
        }
        await harness.shutdown()
    }

    /// With an allow-list, a playlist from an allowed origin that points at other hosts cannot make the proxy
    /// fetch them: the rewritten URIs are refused when the player follows them, keys included, and the origin's
    /// redirect into a forbidden host is refused too.
    @Test func playlistsAndRedirectsCannotLeadOutsideTheAllowList() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-ssrf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let playlist = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-KEY:METHOD=AES-128,URI="http://169.254.169.254/latest/meta-data/iam/key"
            #EXTINF:4.0,
            http://169.254.169.254/latest/meta-data/iam/security-credentials/
            #EXTINF:4.0,
            http://internal.example/admin.ts
            #EXTINF:4.0,
            redirect.ts
            #EXT-X-ENDLIST

            """
        try Data(playlist.utf8).write(to: dir.appendingPathComponent("list.m3u8"))
        let harness = try await ProxyHarness.start(serving: dir, configureOrigin: { $0.destinationPolicy.allowedHosts = ["127.0.0.1"] })
        harness.origin.setFault(.redirect(to: "http://169.254.169.254/latest/meta-data/"), for: "/redirect.ts")
        let served = try await harness.get(harness.url("/list.m3u8"))
        #expect(served.status == 200)
        let uris = served.text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(uris.count == 3)
        for uri in uris {
            let response = try await harness.get(harness.base + uri)
            #expect(response.status == 403, "\(uri) → \(response.status) \(response.text)")
        }
        let key = try #require(KeyServingTests.keyPaths(served.text).first)
        let keyResponse = try await harness.get(harness.base + key)
        #expect(keyResponse.status >= 400 && keyResponse.status != 404, "\(keyResponse.status) \(keyResponse.text)")
        #expect(keyResponse.body.count != 16)
        // The only origin requests are the playlist and the redirecting segment, both on the allowed host.
        #expect(Set(harness.origin.requests.map(\.path)) == ["/list.m3u8", "/redirect.ts"])
        await harness.shutdown()
    }

    // MARK: Request smuggling and malformed heads

    /// Each shape carries a second request ("/smuggled") in what a lenient parser would take as the body or as
    /// a separate request. The server must answer at most the first request, never the smuggled one.
    @Test(arguments: [
        // Two Content-Length values.
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 41\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        // A list in Content-Length.
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0, 41\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        // Obfuscated Transfer-Encoding with Content-Length.
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 41\r\nTransfer-Encoding: xchunked\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 41\r\nTransfer-Encoding : chunked\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        // Obs-fold hiding a Transfer-Encoding.
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\r\n Transfer-Encoding: chunked\r\nContent-Length: 41\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        // Bare CR inside a header.
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\rContent-Length: 41\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        // Signed and non-decimal Content-Length.
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: +41\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0x29\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
        // Chunked body with a chunk-size that overflows.
        "GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF1\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    ])
    func smugglingShapesNeverAnswerTheSmuggledRequest(_ request: String) async throws {
        let harness = try await ProxyHarness.start(serving: Self.emptyOrigin())
        let statuses = try await Self.statusesBeforeTheSentinel(port: harness.port, after: request)
        #expect(statuses.count <= 1, "answered \(statuses)")
        #expect(!statuses.contains("404"), "the smuggled request was routed")
        // The server is still healthy for the next client.
        let health = try await harness.get("\(harness.base)/healthz")
        #expect(health.status == 200)
        await harness.shutdown()
    }

    /// The control of ``smugglingShapesNeverAnswerTheSmuggledRequest(_:)``: the same second request, sent as a request
    /// of its own, is answered (a 404) and seen before the sentinel's answer — so a smuggled one would be too.
    @Test func aSecondRequestOfItsOwnIsSeenBeforeTheSentinel() async throws {
        let harness = try await ProxyHarness.start(serving: Self.emptyOrigin())
        let statuses = try await Self.statusesBeforeTheSentinel(
            port: harness.port, after: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(statuses == ["200", "404"])
        await harness.shutdown()
    }

    /// The statuses answered to `request`: it is followed on the connection by a sentinel request that closes it
    /// (`Connection: close`), and answers come in request order, so everything answered before the sentinel has come
    /// once the connection closes — an event, however slow the machine (a request refused closes the connection
    /// too). A connection still open after 60 s fails the test: the server took more bytes as a body than any shape
    /// declares, and swallowed the sentinel. The sentinel's answer, a 405 (`DELETE` of a key: no shape is answered
    /// so), is not among those returned.
    private static func statusesBeforeTheSentinel(port: Int, after request: String) async throws -> [String] {
        let sentinel = "DELETE /keys/sentinel HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let (response, closed) = try await RawHTTP.exchange(port: port, Array((request + sentinel).utf8), readTimeout: 60)
        #expect(closed, "the connection outlived its sentinel: \(response.prefix(300))")
        var statuses = statuses(response)
        if statuses.last == "405" { statuses.removeLast() }
        return statuses
    }

    /// Heads the HTTP/1.1 grammar does not allow get one 400 and a closed connection.
    @Test(arguments: [
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX A: b\r\n\r\n",  // space in a field name
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n",  // bare CR
        "GET /healthz HTTP/1.1\r\nHost: x\r\n\u{0}X: y\r\n\r\n",  // NUL
        "GET /he althz HTTP/1.1\r\nHost: x\r\n\r\n",  // space in the target
        "GET\r\n\r\n",
    ])
    func malformedHeadsAreRefused(_ request: String) async throws {
        let harness = try await ProxyHarness.start(serving: Self.emptyOrigin())
        let (response, closed) = try await RawHTTP.exchange(port: harness.port, Array(request.utf8), readTimeout: 60)
        #expect(response.isEmpty || response.hasPrefix("HTTP/1.1 400") || response.hasPrefix("HTTP/1.1 505"), "\(response.prefix(80))")
        #expect(closed)
        let health = try await harness.get("\(harness.base)/healthz")
        #expect(health.status == 200)
        await harness.shutdown()
    }

    /// A very long request line is refused without echoing it back.
    @Test func hugeRequestLineIsRefused() async throws {
        let harness = try await ProxyHarness.start(serving: Self.emptyOrigin())
        let target = "/http/127.0.0.1:1/" + String(repeating: "a", count: 200_000)
        let (response, closed) = try await RawHTTP.exchange(
            port: harness.port, Array("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n".utf8), readTimeout: 60)
        #expect(response.isEmpty || response.hasPrefix("HTTP/1.1 4"))
        #expect(response.count < 4096)
        #expect(closed)
        #expect(harness.origin.requests.isEmpty)
        await harness.shutdown()
    }

    // MARK: Hostile playlists

    /// A playlist over the size limit is a 502 `corrupted` for the player and a `corrupted` failure for fetch,
    /// and is never cached.
    @Test func oversizedPlaylistsAreRefusedByProxyAndFetch() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-huge-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let huge =
            "#EXTM3U\n#EXT-X-TARGETDURATION:4\n" + (0..<20_000).map { "#EXTINF:4.0,\nsegment-\($0).ts\n" }.joined() + "#EXT-X-ENDLIST\n"
        #expect(huge.utf8.count > 300_000)
        try Data(huge.utf8).write(to: dir.appendingPathComponent("huge.m3u8"))
        let harness = try await ProxyHarness.start(serving: dir, configure: { $0.maxPlaylistBytes = 256 << 10 })
        let response = try await harness.get(harness.url("/huge.m3u8"))
        #expect(response.status == 502)
        #expect(response.text.contains("corrupted"))
        try await harness.waitForIdle()
        #expect(harness.store.lookup(CacheKey(try OriginURL(harness.originURL("/huge.m3u8")))) == nil)

        let fetch = try DownloaderHarness(origin: harness.origin, configure: { $0.maxPlaylistBytes = 256 << 10 })
        let item = try await fetch.fetch("/huge.m3u8")
        #expect(item.state == .failed)
        #expect(item.errorCode == "corrupted")
        #expect(try fetch.stored("/huge.m3u8") == nil)
        await fetch.shutdown()
        await harness.shutdown()
    }

    /// Playlists that point at themselves or at each other: `fetch` fails with `corrupted` after a bounded
    /// number of requests instead of looping; the proxy answers every request once.
    @Test func playlistLoopsEndInsteadOfLooping() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-loop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\nself.m3u8\n".utf8).write(to: dir.appendingPathComponent("self.m3u8"))
        try Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\nb.m3u8\n".utf8).write(to: dir.appendingPathComponent("a.m3u8"))
        try Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\na.m3u8\n".utf8).write(to: dir.appendingPathComponent("b.m3u8"))
        // A media playlist whose "segments" are itself and a master.
        try Data("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nmedia.m3u8\n#EXTINF:4,\na.m3u8\n#EXT-X-ENDLIST\n".utf8)
            .write(to: dir.appendingPathComponent("media.m3u8"))
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        for path in ["/self.m3u8", "/a.m3u8"] {
            origin.clearLog()
            let item = try await fetch.fetch(path)
            #expect(item.state == .failed, "\(path): \(item.state)")
            #expect(item.errorCode == "corrupted", "\(path): \(item.errorCode ?? "-")")
            #expect(origin.requests.count <= 4, "\(path): \(origin.requests.count) origin requests")
        }
        origin.clearLog()
        let media = try await fetch.fetch("/media.m3u8")
        #expect(media.state == .cached || media.state == .failed)
        #expect(origin.requests.count <= 6, "\(origin.requests.count) origin requests")
        await fetch.shutdown()

        origin.clearLog()
        let harness = try await ProxyHarness.start(origin: origin)
        for path in ["/self.m3u8", "/a.m3u8", "/b.m3u8", "/media.m3u8"] {
            let response = try await harness.get(harness.url(path))
            #expect(response.status == 200)
        }
        try await harness.waitForIdle()
        #expect(origin.requests.count <= 12, "the proxy followed playlist references by itself: \(origin.requests.map(\.path))")
        await harness.shutdown()
    }
}

extension Array where Element == UInt8 {
    func containsSubsequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, count >= needle.count else { return false }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if self[start..<(start + needle.count)].elementsEqual(needle) { return true }
        }
        return false
    }
}
