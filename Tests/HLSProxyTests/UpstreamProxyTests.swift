import Foundation
import HLSTestSupport
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
        let harness = try await ProxyHarness.start(
            origin: origin, configureOrigin: { $0.proxy = .server(host: "127.0.0.1", port: upstream.port) })
        return (origin, upstream, harness)
    }

    @Test func originRequestsGoThroughTheUpstreamProxyAndHitsStayLocal() async throws {
        let (dir, segment) = try Self.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (origin, upstream, harness) = try await Self.proxied(dir)
        defer {
            Task {
                await harness.shutdown(); await upstream.stop()
            }
        }
        let base = "\(harness.base)/http/\(Self.host)"

        let playlist = try await harness.get(base + "/index.m3u8")
        #expect(playlist.status == 200)
        #expect(playlist.text.contains("/http/\(Self.host)/seg0.ts"), "rewritten through the proxy: \(playlist.text)")
        let miss = try await harness.get(base + "/seg0.ts")
        #expect(miss.status == 200)
        #expect(miss.headers.first(name: "X-Cache") == "MISS")
        #expect(sameBytes(miss.body, segment), "\(miss.body.count) bytes")
        // The proxy was asked for a tunnel to the origin by name; the origin saw the requests with its own Host.
        #expect(Set(upstream.requests) == ["CONNECT \(Self.host):80"], "\(upstream.requests)")
        let seen = origin.requests
        #expect(seen.map(\.path) == ["/index.m3u8", "/seg0.ts"], "\(seen.map(\.path))")
        #expect(seen.allSatisfy { request in request.headers.contains { $0.0.lowercased() == "host" && $0.1 == Self.host } })

        try await harness.waitForIdle()
        let hit = try await harness.get(base + "/seg0.ts")
        #expect(hit.headers.first(name: "X-Cache") == "HIT")
        #expect(sameBytes(hit.body, segment), "\(hit.body.count) bytes")
        #expect(origin.requests.count == 2, "a hit does not go out")
    }

    /// The destination policy is ours to apply, not the proxy's: an address the policy refuses is refused before
    /// any request leaves, proxy or not.
    @Test func refusedDestinationsNeverReachTheUpstreamProxy() async throws {
        let (dir, _) = try Self.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (origin, upstream, harness) = try await Self.proxied(dir)
        defer {
            Task {
                await harness.shutdown(); await upstream.stop()
            }
        }
        for target in ["/http/169.254.169.254/latest/meta-data/", "/http/[fe80::1]/seg0.ts", "/http/%5Bfe80::1%5D/seg0.ts"] {
            // Raw, so the brackets of the IPv6 literal reach the server as a player sends them.
            let (response, _) = try await RawHTTP.exchange(
                port: harness.port, Array("GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), readTimeout: 60)
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
        let harness = try await ProxyHarness.start(
            origin: origin, configureOrigin: { $0.proxy = .server(host: "127.0.0.1", port: origin.port) })
        defer { Task { await harness.shutdown() } }
        let refused = try await harness.get("\(harness.base)/http/\(Self.host)/seg0.ts")
        #expect(refused.status == 502)
        #expect(refused.text.contains("upstream proxy refused a tunnel"), "\(refused.text)")
        #expect(origin.requests.map(\.method) == ["CONNECT"], "asked once, not retried")
        try await harness.waitForIdle()
        #expect(try harness.store.usage().count == 0)
    }
}

/// A proxy that wants credentials (`origin.proxy` = `http://USER:PASSWORD@HOST:PORT`).
@Suite struct AuthenticatingUpstreamProxyTests {
    static let user = "alice"
    static let password = "s3cr:t@"
    static let expected = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()

    /// The fixture's origin behind a proxy that requires ``expected``.
    static func authenticatingProxy() async throws -> (URL, [UInt8], TestOrigin, ConnectProxy) {
        let (dir, segment) = try UpstreamProxyTests.fixture()
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let upstream = try await ConnectProxy.start(forwardingTo: origin.port, requiredAuthorization: Self.expected)
        return (dir, segment, origin, upstream)
    }

    /// The right credentials go as `Basic` `Proxy-Authorization` on the tunnel and the segment plays; wrong or
    /// missing ones are a 502 saying the proxy asks for authentication, asked once (not retried), nothing cached.
    @Test func credentialsReachTheProxyAndARefusalIsNamed() async throws {
        let (dir, segment, origin, upstream) = try await Self.authenticatingProxy()
        defer {
            try? FileManager.default.removeItem(at: dir)
            Task {
                await upstream.stop(); await origin.stop()
            }
        }
        let path = "/http/\(UpstreamProxyTests.host)/seg0.ts"
        // A harness stops its origin when shut down: all of them are shut down at the end.
        var harnesses: [ProxyHarness] = []
        defer { Task { [harnesses] in for harness in harnesses { await harness.shutdown() } } }

        for (password, label) in [("wrong", "a wrong password"), (nil, "no credentials")] as [(String?, String)] {
            let refused = try await ProxyHarness.start(
                origin: origin,
                configureOrigin: {
                    $0.proxy = .server(
                        host: "127.0.0.1", port: upstream.port, authorization: password.map { .basic(username: Self.user, password: $0) })
                })
            harnesses.append(refused)
            let before = upstream.requests.count
            let response = try await refused.get(refused.base + path)
            #expect(response.status == 502, "\(label)")
            #expect(response.text.contains("asks for authentication (407)"), "\(label): \(response.text)")
            #expect(upstream.requests.count == before + 1, "\(label): asked once")
            try await refused.waitForIdle()
            #expect(try refused.store.usage().count == 0, "\(label)")
        }
        #expect(origin.requests.isEmpty, "nothing got through without the credentials")

        let harness = try await ProxyHarness.start(
            origin: origin,
            configureOrigin: {
                $0.proxy = .server(
                    host: "127.0.0.1", port: upstream.port, authorization: .basic(username: Self.user, password: Self.password))
            })
        harnesses.append(harness)
        let played = try await harness.get(harness.base + path)
        #expect(played.status == 200)
        let same = played.body == segment
        #expect(same, "\(played.body.count) bytes: \(played.text.prefix(300))")
        #expect(upstream.authorizations.last == Self.expected)
        #expect(origin.requests.map(\.path) == ["/seg0.ts"])
        #expect(
            origin.requests.allSatisfy { request in !request.headers.contains { $0.0.lowercased() == "proxy-authorization" } },
            "the credentials are the proxy's, never sent to the origin")
    }

    /// `fetch` and `resume` take the origin flags too: a `fetch` through the proxy with a wrong password fails
    /// (the name resolves nowhere but through the proxy), and `resume --upstream-proxy` with the right, %-escaped
    /// credentials downloads the item.
    @Test func fetchAndResumeTakeTheUpstreamProxyFlag() async throws {
        let (dir, segment, origin, upstream) = try await Self.authenticatingProxy()
        defer {
            try? FileManager.default.removeItem(at: dir)
            Task {
                await upstream.stop(); await origin.stop()
            }
        }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-upstream-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let config = cache.appendingPathComponent("hlscache.yaml")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        try Data("downloads:\n  attempts: 1\n".utf8).write(to: config)
        let common = ["--cache-dir", cache.appendingPathComponent("c").path, "--config", config.path, "--free-disk-cushion", "0"]
        let url = "http://\(UpstreamProxyTests.host)/index.m3u8"

        let refused = try await ServeShutdownTests.run(
            ["fetch", url, "--id", "viaproxy", "--upstream-proxy", "alice:wrong@127.0.0.1:\(upstream.port)"] + common, stderr: true)
        #expect(refused.status != 0)
        #expect(refused.stdout.contains("407"), "\(refused.stdout)")
        #expect(!refused.stdout.contains("wrong"), "the password is not printed: \(refused.stdout)")
        #expect(upstream.authorizations.last == "Basic " + Data("alice:wrong".utf8).base64EncodedString())

        let escaped = "http://alice:s3cr%3At%40@127.0.0.1:\(upstream.port)/"
        let resumed = try await ServeShutdownTests.run(["resume", "viaproxy", "--json", "--upstream-proxy", escaped] + common)
        #expect(resumed.status == 0, "\(resumed.stdout)")
        #expect(upstream.authorizations.last == Self.expected)
        #expect(origin.requests.map(\.path) == ["/index.m3u8", "/seg0.ts"], "\(origin.requests.map(\.path))")
        let show = try await ServeShutdownTests.run(["show", "viaproxy", "--json"] + common)
        let item = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any], "\(show.stdout)")
        #expect(item["state"] as? String == "cached", "\(item)")
        #expect(item["bytesDone"] as? Int ?? 0 >= segment.count, "\(item)")
    }
}

/// `origin.proxy` = `socks5://HOST:PORT`: every origin request goes through a SOCKS5 proxy, which resolves the names.
@Suite struct SOCKSUpstreamProxyTests {
    @Test func originRequestsGoThroughTheSOCKSProxy() async throws {
        let (dir, segment) = try UpstreamProxyTests.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let socks = try await SOCKSProxy.start(forwardingTo: origin.port)
        defer { Task { await socks.stop() } }
        let harness = try await ProxyHarness.start(
            origin: origin, configureOrigin: { $0.proxy = .socksServer(host: "127.0.0.1", port: socks.port) })
        defer { Task { await harness.shutdown() } }
        let base = "\(harness.base)/http/\(UpstreamProxyTests.host)"

        let playlist = try await harness.get(base + "/index.m3u8")
        #expect(playlist.status == 200)
        #expect(playlist.text.contains("/http/\(UpstreamProxyTests.host)/seg0.ts"), "\(playlist.text)")
        let miss = try await harness.get(base + "/seg0.ts")
        #expect(miss.status == 200 && miss.headers.first(name: "X-Cache") == "MISS")
        let same = miss.body == segment
        #expect(same, "\(miss.body.count) bytes")
        // The name went to the proxy (it resolves it); the origin saw its own Host.
        #expect(Set(socks.requests) == ["\(UpstreamProxyTests.host):80"], "\(socks.requests)")
        #expect(origin.requests.map(\.path) == ["/index.m3u8", "/seg0.ts"])
        #expect(
            origin.requests.allSatisfy { request in
                request.headers.contains { $0.0.lowercased() == "host" && $0.1 == UpstreamProxyTests.host }
            })
        try await harness.waitForIdle()
        #expect(try await harness.get(base + "/seg0.ts").headers.first(name: "X-Cache") == "HIT")

        // The destination policy applies before the proxy.
        let (refused, _) = try await RawHTTP.exchange(
            port: harness.port, Array("GET /http/169.254.169.254/latest/meta-data/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8),
            readTimeout: 60)
        #expect(refused.hasPrefix("HTTP/1.1 403"), "\(refused.prefix(200))")
        #expect(socks.requests.count == 1, "\(socks.requests)")
    }

    /// A SOCKS proxy that wants a password, or cannot reach the origin, is a 502 naming it; nothing is cached.
    @Test func aSOCKSProxyThatRefusesIsA502NamingIt() async throws {
        let (dir, _) = try UpstreamProxyTests.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let wantsPassword = try await SOCKSProxy.start(forwardingTo: origin.port, requiringMethod: 2)
        // Its target is a port nothing listens on: the proxy answers "connection refused".
        let closed = try await SOCKSProxy.start(forwardingTo: 1)
        defer {
            Task {
                await wantsPassword.stop(); await closed.stop()
            }
        }
        var harnesses: [ProxyHarness] = []
        defer { Task { [harnesses] in for harness in harnesses { await harness.shutdown() } } }
        for (socks, expected) in [
            (wantsPassword, "asks for authentication, which is not supported"), (closed, "could not connect to the origin"),
        ] {
            let harness = try await ProxyHarness.start(
                origin: origin, configureOrigin: { $0.proxy = .socksServer(host: "127.0.0.1", port: socks.port) })
            harnesses.append(harness)
            let response = try await harness.get("\(harness.base)/http/\(UpstreamProxyTests.host)/seg0.ts")
            #expect(response.status == 502, "\(expected)")
            #expect(response.text.contains(expected), "\(response.text)")
            try await harness.waitForIdle()
            #expect(try harness.store.usage().count == 0)
        }
        #expect(origin.requests.isEmpty)
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
            let (response, closed) = try await RawHTTP.exchange(
                port: harness.port, Array("GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), readTimeout: 60)
            // A failure tells a connection closed without an answer from one that got nothing for 60 s.
            seen[String(response.prefix(12)) + (closed ? "" : " (no answer in 60 s)"), default: 0] += 1
        }
        #expect(seen == ["HTTP/1.1 403": 300], "\(seen)")
    }

    /// A download this request started is its own: when it fails before the request subscribes to it (a refused
    /// destination fails on the spot when the origin's event loop is the request's), the request gets that failure,
    /// not a second download. Counted by the origin failures on `/metrics`: one per request.
    @Test func aFailedDownloadTheRequestStartedIsNotStartedAgain() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let requests = 100
        for index in 0..<requests {
            let response = try await harness.get("\(harness.base)/http/169.254.169.254/once\(index).ts")
            #expect(response.status == 403)
        }
        try await harness.waitForIdle()
        let (samples, _) = try PrometheusText.parse(try await harness.get(harness.base + "/metrics").text)
        #expect(samples.value("hlscache_origin_errors_total", ["code": "forbiddenDestination"]) == Double(requests))
        #expect(samples.value("hlscache_http_requests_total", ["route": "segment", "status": "403"]) == Double(requests))
    }
}
