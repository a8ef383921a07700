import Foundation
import HLSCacheCore
import HLSKeys
import HLSOrigin
import HLSTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import HLSProxy

/// AES-128 streams through the proxy: key URIs rewritten to `/keys/{keyid}`, keys fetched with the origin's
/// configured headers, stored sealed, served to local clients only, expired and renewed (docs/design.md §7).
@Suite(.serialized) struct KeyServingTests {
    static func aes128() async throws -> URL { try await Streams.stream("aes128-rotation") { try FFmpeg.makeAES128(in: $0) } }

    static func keyFiles(_ dir: URL) throws -> [String: [UInt8]] {
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("keys").path).filter {
            $0.hasSuffix(".key")
        }
        return Dictionary(
            uniqueKeysWithValues: try names.map { ($0, [UInt8](try Data(contentsOf: dir.appendingPathComponent("keys/" + $0)))) })
    }

    static func keyLines(_ playlist: String) -> [Substring] {
        playlist.split(separator: "\n").filter { $0.hasPrefix("#EXT-X-KEY") || $0.hasPrefix("#EXT-X-SESSION-KEY") }
    }

    static func keyPaths(_ playlist: String) -> [String] {
        keyLines(playlist).compactMap { line in
            guard let start = line.range(of: "URI=\"") else { return nil }
            let rest = line[start.upperBound...]
            return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
        }
    }

    @Test func protectedStreamPlaysThroughKeysEndpointAndOfflineWithoutKeysOnDisk() async throws {
        let dir = try await Self.aes128()
        let keys = try Self.keyFiles(dir)
        #expect(keys.count >= 2, "the stream rotates keys")
        let harness = try await ProxyHarness.start(
            serving: dir, configureOrigin: { $0.originHeaders["127.0.0.1"] = [("X-Token", "v")] })
        defer { Task { await harness.shutdown() } }
        for name in keys.keys { harness.origin.setFault(.requireHeader("X-Token", "v"), for: "/keys/" + name) }

        let direct = try await FFmpeg.frameMD5(harness.originURL("/index.m3u8"), extraArguments: ["-headers", "X-Token: v\r\n"])
        #expect(direct.count > 50)
        harness.origin.clearLog()

        // ffmpeg first, on a cold cache (it asks for the playlist with `Range: bytes=0-`).
        let proxied = try await FFmpeg.frameMD5(harness.url("/index.m3u8"))
        #expect(proxied == direct)

        let served = try await harness.get(harness.url("/index.m3u8")).text
        let original = try String(contentsOf: dir.appendingPathComponent("index.m3u8"), encoding: .utf8)
        let paths = Self.keyPaths(served)
        #expect(paths.count == Self.keyLines(original).count)
        #expect(paths.allSatisfy { $0.hasPrefix("/keys/") && KeyID($0.dropFirst(6).prefix(32)) != nil }, "\(paths)")
        #expect(Set(paths).count == keys.count, "one id per key")
        // Only the URI changes: the IV and METHOD stay.
        for (servedLine, originalLine) in zip(Self.keyLines(served), Self.keyLines(original)) {
            let iv = originalLine.split(separator: ",").first { $0.hasPrefix("IV=") }
            #expect(iv.map { servedLine.contains($0) } ?? true)
            #expect(servedLine.contains("METHOD=AES-128"))
        }

        for name in keys.keys {
            #expect(harness.origin.requests(matching: "/keys/" + name).count == 1, "\(name) is fetched once")
            #expect(harness.origin.requests(matching: "/keys/" + name).allSatisfy { $0.headers.contains { $0 == ("X-Token", "v") } })
        }
        try await harness.waitForIdle()

        await harness.origin.stop()
        let offline = try await FFmpeg.frameMD5(harness.url("/index.m3u8"))
        #expect(offline == direct, "plays from the proxy with the origin stopped")

        for (name, bytes) in keys {
            #expect(!anyFile(under: harness.cacheDirectory, contains: bytes), "\(name) is in the clear under the cache dir")
        }
        let mode = try FileManager.default.attributesOfItem(atPath: harness.cacheDirectory.appendingPathComponent("master.key").path)[
            .posixPermissions]
        #expect(mode as? Int == 0o600)
    }

    @Test func keyResponseIsSixteenBytesThatNoCacheKeeps() async throws {
        let dir = try await Self.aes128()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let served = try await harness.get(harness.url("/index.m3u8")).text
        let path = try #require(Self.keyPaths(served).first)
        let response = try await harness.get(harness.base + path)
        #expect(response.status == 200)
        #expect(response.body == (try Self.keyFiles(dir))["key0.key"])
        #expect(response.headers.first(name: "Cache-Control") == "no-store")
        #expect(response.headers.first(name: "Content-Type") == "application/octet-stream")

        let unknown = try await harness.get(harness.base + "/keys/0123456789abcdef0123456789abcdef")
        #expect(unknown.status == 404)
        #expect(unknown.text.contains("\"error\":\"notFound\""))
        let malformed = try await harness.get(harness.base + "/keys/..%2f..%2fetc")
        #expect(malformed.status == 404)
        let post = try await harness.get(harness.base + path, method: .POST)
        #expect(post.status == 405)
    }

    /// An encoder restarted with a new key at the same URI: the stored copy of a key a live playlist names is
    /// served for the live window plus two target durations after it was fetched, then fetched again — not the
    /// previous run's key for the whole key TTL. A VOD playlist's key keeps the TTL.
    @Test func aLiveStreamsKeyIsRefetchedAfterItsWindow() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let (first, second) = ([UInt8](repeating: 0xA1, count: 16), [UInt8](repeating: 0xB2, count: 16))
        let live = "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-KEY:METHOD=AES-128,URI=\"enc.key\"\n#EXTINF:1.0,\nseg0.ts\n"
        harness.origin.setBody(Array(live.utf8), for: "/enc/live.m3u8")
        harness.origin.setBody(Array((live + "#EXT-X-ENDLIST\n").utf8), for: "/vod/index.m3u8")
        harness.origin.setBody(first, for: "/enc/enc.key")
        harness.origin.setBody(first, for: "/vod/enc.key")
        let livePath = try #require(Self.keyPaths(try await harness.get(harness.url("/enc/live.m3u8")).text).first)
        let vodPath = try #require(Self.keyPaths(try await harness.get(harness.url("/vod/index.m3u8")).text).first)
        #expect(sameBytes(try await harness.get(harness.base + livePath).body, first))
        #expect(sameBytes(try await harness.get(harness.base + vodPath).body, first))

        // The encoder restarts with a new key; past the window (1 s + 2 × 1 s) the live key is fetched again.
        harness.origin.setBody(second, for: "/enc/enc.key")
        harness.origin.setBody(second, for: "/vod/enc.key")
        try await Task.sleep(for: .milliseconds(3300))
        _ = try await harness.get(harness.url("/enc/live.m3u8"))
        #expect(sameBytes(try await harness.get(harness.base + livePath).body, second))
        #expect(sameBytes(try await harness.get(harness.base + vodPath).body, first), "a VOD key keeps its TTL")
        #expect(harness.origin.requests(matching: "/enc/enc.key").count == 2)
    }

    @Test func sharedAndRotatingKeysAreFetchedOnceEach() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        defer { Task { await harness.shutdown() } }
        let key = (0..<16).map { UInt8(0x30 + $0) }
        harness.origin.setBody(key, contentType: "application/octet-stream", for: "/k/shared.key")
        harness.origin.setBody((0..<16).map { UInt8(0x50 + $0) }, contentType: "application/octet-stream", for: "/k/other.key")
        harness.origin.setFault(.stall(delay: .milliseconds(300)), for: "/k/shared.key")
        for rendition in ["a", "b"] {
            harness.origin.setBody(
                Array(
                    """
                    #EXTM3U
                    #EXT-X-TARGETDURATION:2
                    #EXT-X-KEY:METHOD=AES-128,URI="../k/shared.key?token=\(rendition)",IV=0x000102030405060708090a0b0c0d0e0f
                    #EXTINF:2,
                    s0.ts
                    #EXT-X-KEY:METHOD=AES-128,URI="/k/other.key"
                    #EXTINF:2,
                    s1.ts
                    #EXT-X-ENDLIST

                    """.utf8), for: "/\(rendition)/index.m3u8")
        }
        let a = Self.keyPaths(try await harness.get(harness.url("/a/index.m3u8")).text)
        let b = Self.keyPaths(try await harness.get(harness.url("/b/index.m3u8")).text)
        // The key path carries the key URL (a node of a fleet that never saw the playlist can fetch it), with its token.
        #expect(a.map { $0.prefix(38) } == b.map { $0.prefix(38) }, "a key shared by renditions (even with different tokens) has one id")
        #expect(Set(a.map { $0.prefix(38) }).count == 2)

        try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for path in a + b + a { group.addTask { try await harness.get(harness.base + path).body } }
            var bodies: [[UInt8]] = []
            for try await body in group { bodies.append(body) }
            #expect(bodies.filter { $0 == key }.count == 3)
            #expect(bodies.allSatisfy { $0.count == 16 })
        }
        #expect(harness.origin.requests(containing: "/k/shared.key").count == 1)
        #expect(harness.origin.requests(containing: "/k/other.key").count == 1)
    }

    /// Licence servers (a KEYFORMAT other than identity) and non-HTTP key URIs stay as written; SAMPLE-AES keys in
    /// the identity format go through /keys/ (EveryKeyMethodTests).
    @Test func licenceServersAndNonHTTPKeysPassThrough() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        defer { Task { await harness.shutdown() } }
        let lines = [
            "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"https://drm.example.com/k1\",KEYFORMAT=\"com.microsoft.playready\"",
            "#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI=\"k2.key\",KEYFORMAT=\"urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed\"",
            "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://asset-1\",KEYFORMAT=\"com.apple.streamingkeydelivery\"",
            "#EXT-X-KEY:METHOD=AES-128,URI=\"data:text/plain;base64,AAECAwQFBgcICQoLDA0ODw==\"",
            "#EXT-X-KEY:METHOD=NONE",
        ]
        let body = (["#EXTM3U", "#EXT-X-TARGETDURATION:2"] + lines.flatMap { [$0, "#EXTINF:2,", "s.ts"] } + ["#EXT-X-ENDLIST", ""]).joined(
            separator: "\n")
        harness.origin.setBody(Array(body.utf8), for: "/p.m3u8")
        let master = """
            #EXTM3U
            #EXT-X-SESSION-KEY:METHOD=AES-128,URI="session.key",IV=0x0F0E0D0C0B0A09080706050403020100
            #EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI="skd://session",KEYFORMAT="com.apple.streamingkeydelivery"
            #EXT-X-STREAM-INF:BANDWIDTH=100000
            p.m3u8

            """
        harness.origin.setBody(Array(master.utf8), for: "/master.m3u8")

        let served = try await harness.get(harness.url("/p.m3u8")).text
        for line in lines { #expect(served.contains(line), "\(line) must pass through untouched") }
        let servedMaster = try await harness.get(harness.url("/master.m3u8")).text
        let sessionKeys = Self.keyLines(servedMaster)
        #expect(sessionKeys.count == 2)
        #expect(sessionKeys[0].hasPrefix("#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"/keys/"))
        #expect(sessionKeys[0].hasSuffix("\",IV=0x0F0E0D0C0B0A09080706050403020100"))
        #expect(sessionKeys[1] == "#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI=\"skd://session\",KEYFORMAT=\"com.apple.streamingkeydelivery\"")
    }

    /// A fleet behind a load balancer hashing paths: `/keys/{id}/…` may reach a node that never served the playlist.
    /// The key URL in the path lets it register and fetch the key; an id that is not the URL's is refused.
    @Test func aKeyPathNamesItsURLSoAServerThatNeverSawThePlaylistAnswersIt() async throws {
        let dir = try await Self.aes128()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let keyURL = try OriginURL(harness.originURL("/keys/key0.key"))
        let id = harness.keys.id(for: keyURL)
        #expect(try harness.keys.record(id) == nil, "never registered")
        let answer = try await harness.get(harness.base + id.path(for: keyURL))
        #expect(answer.status == 200)
        #expect(sameBytes(answer.body, try #require(try Self.keyFiles(dir)["key0.key"])))
        #expect(try harness.keys.record(id)?.isStored == true, "registered and stored sealed")
        let other = try OriginURL(harness.originURL("/keys/key1.key"))
        let mismatched = try await harness.get(harness.base + id.path + other.proxyPath)
        #expect(mismatched.status == 404)
        #expect(try harness.keys.record(harness.keys.id(for: other)) == nil)
    }

    @Test func aKeyThatIsNot16BytesIsRefused() async throws {
        let dir = try await Self.aes128()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array(repeating: 0x41, count: 17), contentType: "application/octet-stream", for: "/keys/key0.key")
        let path = try #require(Self.keyPaths(try await harness.get(harness.url("/index.m3u8")).text).first)
        let response = try await harness.get(harness.base + path)
        #expect(response.status == 502)
        #expect(response.text.contains("\"error\":\"keyUnavailable\""))
        #expect(!response.text.contains("AAAAAAAAAAAAAAAAA"))
        let id = try #require(KeyID(path.dropFirst(6).prefix(32)))
        #expect(try harness.keys.record(id)?.isStored == false)
    }

    @Test func expiredKeyIsRenewedWhileTheOriginAnswersAndRefusedWhenItIsDown() async throws {
        let dir = try await Self.aes128()
        // The key store's clock is moved by hand: with a wall clock and a short TTL, a loaded CI machine pausing the
        // test between two requests would expire the key early.
        let clock = KeyTestClock()
        let harness = try await ProxyHarness.start(serving: dir, configureKeys: { $0.ttl = .seconds(60) }, keyClock: { clock.now })
        defer { Task { await harness.shutdown() } }
        let path = try #require(Self.keyPaths(try await harness.get(harness.url("/index.m3u8")).text).first)
        let key = try #require(try Self.keyFiles(dir)["key0.key"])
        #expect(sameBytes(try await harness.get(harness.base + path).body, key))
        clock.advance(59)
        #expect(sameBytes(try await harness.get(harness.base + path).body, key))
        #expect(harness.origin.requests(matching: "/keys/key0.key").count == 1)

        clock.advance(2)
        #expect(sameBytes(try await harness.get(harness.base + path).body, key), "renewed")
        #expect(harness.origin.requests(matching: "/keys/key0.key").count == 2)

        clock.advance(61)
        await harness.origin.stop()
        let refused = try await harness.get(harness.base + path)
        #expect(refused.status == 403)
        #expect(refused.text.contains("\"error\":\"expired\""))
        #expect(!anyFile(under: harness.cacheDirectory, contains: key))
    }

    @Test func aWrongMasterKeyRefetchesInsteadOfServingGarbage() async throws {
        let dir = try await Self.aes128()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let path = try #require(Self.keyPaths(try await harness.get(harness.url("/index.m3u8")).text).first)
        let key = try #require(try Self.keyFiles(dir)["key0.key"])
        #expect(sameBytes(try await harness.get(harness.base + path).body, key))
        let id = try #require(KeyID(path.dropFirst(6).prefix(32)))

        // Another process with another master key (HLSCACHE_MASTER_KEY set differently) on the same cache.
        let other = try KeyService(
            directory: harness.cacheDirectory.path, configuration: KeyConfiguration(), masterKey: MasterKey.generate(),
            fetcher: harness.originClient, logger: Logger(label: "test"))
        #expect(other.state(of: try #require(try other.record(id))) == .unreadable)
        #expect(try await other.key(id) == key)
        #expect(harness.origin.requests(matching: "/keys/key0.key").count == 2, "refetched from the origin")

        // Now the server's own master key cannot open the copy; with the origin down it says so clearly.
        await harness.origin.stop()
        let refused = try await harness.get(harness.base + path)
        #expect(refused.status == 403)
        #expect(refused.text.contains("\"error\":\"keyUnavailable\""))
    }

    @Test func keysAreForLoopbackClientsUnlessAllowed() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        defer { Task { await harness.shutdown() } }
        let lan = try SocketAddress(ipAddress: "192.168.1.20", port: 40000)
        #expect(!KeyEndpoint.allows(peer: lan, keys: harness.keys))
        #expect(KeyEndpoint.allows(peer: try SocketAddress(ipAddress: "127.0.0.1", port: 40000), keys: harness.keys))
        #expect(KeyEndpoint.allows(peer: try SocketAddress(ipAddress: "::1", port: 40000), keys: harness.keys))
        #expect(!KeyEndpoint.allows(peer: nil, keys: harness.keys))

        // The whole request path, with an injected peer address. A testing channel whose loop may be used from any
        // thread (the handler's work comes back to its loop from others; an EmbeddedEventLoop must not be).
        let channel = NIOAsyncTestingChannel()
        channel.remoteAddress = lan
        let services = harness.server.services
        let configuration = harness.server.configuration
        try await channel.testingEventLoop.executeInContext {
            try channel.pipeline.syncOperations.addHandler(
                ProxyHTTPHandler(router: ProxyRouter(services: services), configuration: configuration))
        }
        try await channel.writeInbound(
            HTTPServerRequestPart.head(
                HTTPRequestHead(version: .http1_1, method: .GET, uri: "/keys/0123456789abcdef0123456789abcdef", headers: ["Host": "x"])))
        try await channel.writeInbound(HTTPServerRequestPart.end(nil))
        // The refusal is written while the request is read (nothing waits): what was written is the whole answer.
        var wire = ""
        while let part = try await channel.readOutbound(as: IOData.self) {
            guard case .byteBuffer(let buffer) = part else { continue }
            wire += String(buffer: buffer)
        }
        #expect(wire.hasPrefix("HTTP/1.1 403 Forbidden\r\n"), "\(wire.prefix(80))")
        #expect(wire.contains("\"error\":\"forbidden\""))
        _ = try? await channel.finish()

        let allowed = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"),
            configureKeys: { $0.access = KeyAccessPolicy(allowedNetworks: [IPNetwork("192.168.1.0/24")!]) })
        defer { Task { await allowed.shutdown() } }
        #expect(KeyEndpoint.allows(peer: lan, keys: allowed.keys))
        #expect(!KeyEndpoint.allows(peer: try SocketAddress(ipAddress: "192.168.2.20", port: 40000), keys: allowed.keys))
    }

    /// A client asking for a registered key by its origin URL is sent to /keys/{id} (access checks, sealed
    /// storage) instead of the generic path, which would cache the key in plaintext.
    @Test func keyFilesAreNotServedThroughTheGenericPath() async throws {
        let dir = try await Self.aes128()
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let playlist = try await harness.get(harness.url("/index.m3u8"))
        #expect(playlist.text.contains("/keys/"))
        let direct = try await harness.get(harness.url("/keys/key0.key"))
        #expect(direct.status == 307)
        let location = try #require(direct.headers.first(name: "Location"))
        #expect(location.hasPrefix("/keys/"))
        let key = try await harness.get(harness.base + location)
        #expect(key.status == 200)
        #expect(key.body == [UInt8](try Data(contentsOf: dir.appendingPathComponent("keys/key0.key"))))
        try await harness.waitForIdle()
        #expect(!anyFile(under: harness.cacheDirectory, contains: key.body), "the key reached the disk in plaintext")
    }
}

/// A clock for the key store that the tests move by hand.
final class KeyTestClock: Sendable {
    private let current = NIOLockedValueBox(Date(timeIntervalSince1970: 1_700_000_000))
    var now: Date { current.withLockedValue { $0 } }
    func advance(_ seconds: Double) { current.withLockedValue { $0 += seconds } }
}
