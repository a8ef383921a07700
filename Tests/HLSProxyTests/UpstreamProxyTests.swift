import Foundation
import Testing

/// `--upstream-proxy` (`origin.proxy`): every origin request goes through an HTTP proxy, which resolves the names.
/// The proxy here (``ConnectProxy``) tunnels every `CONNECT` to a ``TestOrigin``; the origin's name, under the
/// reserved `.test` domain, resolves nowhere, so an answer can only have come through the proxy.
@Suite struct UpstreamProxyTests {
    static let host = "media.hlscache.test"

    static func fixture() throws -> (URL, [UInt8]) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-upstream-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let segment = randomBytes(150_000)
        try Data(segment).write(to: dir.appendingPathComponent("seg0.ts"))
        let playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXTINF:4.0,\nseg0.ts\n#EXT-X-ENDLIST\n"
        try Data(playlist.utf8).write(to: dir.appendingPathComponent("index.m3u8"))
        return (dir, segment)
    }

    /// A test origin serving `dir`, a tunnelling proxy in front of it, and a proxy harness using that upstream proxy.
    static func proxied(_ dir: URL) async throws -> (TestOrigin, ConnectProxy, ProxyHarness) {
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let upstream = try await ConnectProxy.start(forwardingTo: origin.port)
        let harness = try await ProxyHarness.start(origin: origin, configureOrigin: { $0.proxy = .server(host: "127.0.0.1", port: upstream.port) })
        return (origin, upstream, harness)
    }

    @Test func originRequestsGoThroughTheUpstreamProxyAndHitsStayLocal() async throws {
        let (dir, segment) = try Self.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (origin, upstream, harness) = try await Self.proxied(dir)
        defer { Task { await harness.shutdown(); await upstream.stop() } }
        let base = "\(harness.base)/http/\(Self.host)"

        let playlist = try await harness.get(base + "/index.m3u8")
        #expect(playlist.status == 200)
        #expect(playlist.text.contains("/http/\(Self.host)/seg0.ts"), "rewritten through the proxy: \(playlist.text)")
        let miss = try await harness.get(base + "/seg0.ts")
        #expect(miss.status == 200)
        #expect(miss.headers.first(name: "X-Cache") == "MISS")
        #expect(miss.body == segment, "\(miss.body.count) bytes")
        // The proxy was asked for a tunnel to the origin by name; the origin saw the requests with its own Host.
        #expect(Set(upstream.requests) == ["CONNECT \(Self.host):80"], "\(upstream.requests)")
        let seen = origin.requests
        #expect(seen.map(\.path) == ["/index.m3u8", "/seg0.ts"], "\(seen.map(\.path))")
        #expect(seen.allSatisfy { request in request.headers.contains { $0.0.lowercased() == "host" && $0.1 == Self.host } })

        try await harness.waitForIdle()
        let hit = try await harness.get(base + "/seg0.ts")
        #expect(hit.headers.first(name: "X-Cache") == "HIT")
        #expect(hit.body == segment, "\(hit.body.count) bytes")
        #expect(origin.requests.count == 2, "a hit does not go out")
    }

    /// The destination policy is ours to apply, not the proxy's: an address the policy refuses is refused before
    /// any request leaves, proxy or not.
    @Test func refusedDestinationsNeverReachTheUpstreamProxy() async throws {
        let (dir, _) = try Self.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (origin, upstream, harness) = try await Self.proxied(dir)
        defer { Task { await harness.shutdown(); await upstream.stop() } }
        for target in ["/http/169.254.169.254/latest/meta-data/", "/http/[fe80::1]/seg0.ts", "/http/%5Bfe80::1%5D/seg0.ts"] {
            // Raw, so the brackets of the IPv6 literal reach the server as a player sends them.
            let (response, _) = try await RawHTTP.exchange(
                port: harness.port, Array("GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), readTimeout: 10)
            #expect(response.hasPrefix("HTTP/1.1 403"), "\(target): \(response.prefix(200))")
            #expect(response.contains("forbiddenDestination"), "\(target)")
        }
        #expect(upstream.requests.isEmpty, "\(upstream.requests)")
        #expect(origin.requests.isEmpty)
    }

    /// A proxy that will not open the tunnel (here: an ordinary web server answering `CONNECT` with 404) is a 502
    /// naming the proxy, at once, and nothing is cached.
    @Test func aProxyThatRefusesTheTunnelIsA502NamingIt() async throws {
        let (dir, _) = try Self.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let harness = try await ProxyHarness.start(origin: origin, configureOrigin: { $0.proxy = .server(host: "127.0.0.1", port: origin.port) })
        defer { Task { await harness.shutdown() } }
        let refused = try await harness.get("\(harness.base)/http/\(Self.host)/seg0.ts")
        #expect(refused.status == 502)
        #expect(refused.text.contains("upstream proxy refused a tunnel"), "\(refused.text)")
        #expect(origin.requests.map(\.method) == ["CONNECT"], "asked once, not retried")
        try await harness.waitForIdle()
        #expect(try harness.store.usage().count == 0)
    }
}

/// A refused destination fails the origin request at once, possibly before the client joined it, and again on the
/// fresh attempt; the client must get that failure's own status (403), never a generic 503. The race itself showed
/// once in 40 runs of the refused-destination test above (its first, cold request) and does not reproduce on demand
/// (reverting the fix, 23 runs of this test, 6,900 requests, some under load: no failure); this checks that
/// immediate failures keep their status over many requests.
@Suite struct ImmediateOriginFailureTests {
    @Test func immediateFailuresKeepTheirStatus() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        var seen: [String: Int] = [:]
        for index in 0..<300 {
            let target = "/http/169.254.169.254/m\(index)"
            let (response, _) = try await RawHTTP.exchange(
                port: harness.port, Array("GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), readTimeout: 10)
            seen[String(response.prefix(12)), default: 0] += 1
        }
        #expect(seen == ["HTTP/1.1 403": 300], "\(seen)")
    }
}
