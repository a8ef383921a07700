import Foundation
import HLSTestSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import HLSCacheCore
import Testing

@testable import HLSProxy

/// What RFC 9110/9112 ask of the server that clients and browsers depend on, checked on the wire: requests that ask
/// for an upgrade, CORS preflights, `Expect: 100-continue`, `Date`, `Host`, absolute-form targets, validators and
/// methods.
@Suite struct HTTPConformanceTests {
    /// Status codes of the responses in a raw exchange, in order.
    private static func statuses(_ response: String) -> [String] {
        RawHTTP.statuses(response)
    }

    // MARK: Upgrade

    /// `curl --http2 URL1 URL2` on http:// sends `Upgrade: h2c` with each request; browsers send `Upgrade: websocket`.
    /// The server does not upgrade (RFC 9110 §7.8 lets it ignore the field): each request gets its ordinary answer and
    /// the connection goes on — pipelined, or with each request in a read of its own.
    @Test(
        arguments: [
            "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
            "Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n",
        ], [0.0, 0.3])
    func upgradeRequestsAreAnsweredAndTheConnectionGoesOn(_ upgrade: String, gap: Double) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(5_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/u.ts")
        let path = "/http/127.0.0.1:\(harness.origin.port)/u.ts"
        let requests = [
            "GET \(path) HTTP/1.1\r\nHost: x\r\n\(upgrade)\r\n",
            "GET /healthz HTTP/1.1\r\nHost: x\r\n\(upgrade)\r\n",
            "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\(upgrade)\r\nabc",
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ]
        let (response, closed) = try await RawHTTP.exchange(port: harness.port, requests.map { Array($0.utf8) }, gap: gap, readTimeout: 60)
        #expect(Self.statuses(response) == ["200", "200", "405", "200"], "\(response.prefix(400))")
        #expect(!response.contains("101"))
        #expect(closed)
    }

    /// What follows a `CONNECT` is a tunnel, not HTTP (the decoder stops there too): it is refused and the connection
    /// closes after the answer, rather than staying open with the rest unread.
    @Test func aConnectRequestIsRefusedAndTheConnectionCloses() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let request = "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        let (response, closed) = try await RawHTTP.exchange(port: harness.port, Array(request.utf8), readTimeout: 60)
        #expect(Self.statuses(response) == ["400"], "\(response.prefix(300))")
        #expect(response.contains("\r\nConnection: close\r\n"))
        #expect(closed)
    }

    /// ``RequestDecoder/isUpgradeRequest(_:)`` says of a head exactly what NIO's decoder does: a head it takes for an
    /// upgrade stops it (nothing after it is decoded), any other does not.
    @Test func theUpgradeTestAgreesWithTheDecoder() throws {
        let heads = [
            "Connection: Upgrade\r\nUpgrade: h2c", "Connection: keep-alive, Upgrade\r\nUpgrade: websocket",
            "Connection: UPGRADE \r\nUpgrade: x",
            "Connection: close\r\nConnection: upgrade\r\nUpgrade: x", "Proxy-Connection: upgrade\r\nUpgrade: x",
            "Connection: upgrade ,close\r\nUpgrade: x",
            "Upgrade: h2c", "Connection: Upgrade", "Connection: upgraded\r\nUpgrade: x", "Connection: Upgrade-Insecure\r\nUpgrade: x",
            "Connection: keep-alive\r\nUpgrade: h2c", "Upgrade-Insecure-Requests: 1\r\nConnection: upgrade",
        ]
        for fields in heads {
            let channel = EmbeddedChannel(handler: ByteToMessageHandler(HTTPRequestDecoder()))
            defer { _ = try? channel.finish() }
            var bytes = channel.allocator.buffer(capacity: 256)
            bytes.writeString("GET /a HTTP/1.1\r\nHost: x\r\n\(fields)\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
            try channel.writeInbound(bytes)
            var heads: [HTTPRequestHead] = []
            while let part = try channel.readInbound(as: HTTPServerRequestPart.self) {
                if case .head(let head) = part { heads.append(head) }
            }
            let first = try #require(heads.first)
            #expect(
                RequestDecoder.isUpgradeRequest(first) == (heads.count == 1), "\(fields.debugDescription): \(heads.count) heads decoded")
        }
    }

    // MARK: CORS

    /// A browser asks before sending headers a player adds (hls.js `xhrSetup`: `Authorization`, custom tokens; `If-Range`
    /// on resumed segments): the preflight allows the headers it names; a list that is not header names, or is too
    /// long, gets the fixed list.
    @Test func preflightsAllowTheHeadersThePageAsksFor() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let url = harness.url("/v/seg.ts")
        func preflight(_ headers: [(String, String)]) async throws -> ProxyHarness.Response {
            try await harness.get(
                url, headers: [("Origin", "http://localhost:8000"), ("Access-Control-Request-Method", "GET")] + headers, method: .OPTIONS)
        }
        let asked = try await preflight([("Access-Control-Request-Headers", "authorization,if-range, range ,x-player-session")])
        #expect(asked.status == 204)
        #expect(asked.headers.first(name: "Access-Control-Allow-Origin") == "http://localhost:8000")
        #expect(asked.headers.first(name: "Access-Control-Allow-Headers") == "authorization, if-range, range, x-player-session")
        #expect(asked.headers.first(name: "Access-Control-Allow-Private-Network") == nil)
        let fixed = ProxyRouter.defaultAllowedHeaders
        for unusable in ["range, x player", "range,,x", "x@y", String(repeating: "x-custom-header, ", count: 80) + "range"] {
            let response = try await preflight([("Access-Control-Request-Headers", unusable)])
            #expect(response.headers.first(name: "Access-Control-Allow-Headers") == fixed, "\(unusable.prefix(40))")
        }
        #expect(try await preflight([]).headers.first(name: "Access-Control-Allow-Headers") == fixed)
        #expect(fixed.contains("If-Range"))
        // Chrome's Private Network Access: an allowed page asks, and is answered (a page not allowed is not: WebPageBoundaryTests).
        let pna = try await preflight([("Access-Control-Request-Private-Network", "true")])
        #expect(pna.headers.first(name: "Access-Control-Allow-Private-Network") == "true")
        #expect(harness.origin.requests.isEmpty)
        // Responses let the page read what players use for byte ranges and validation.
        harness.origin.setBody(randomBytes(1_000), contentType: "video/mp2t", for: "/v/seg.ts")
        let exposed = try #require(
            try await harness.get(url, headers: [("Origin", "http://localhost:8000")]).headers.first(name: "Access-Control-Expose-Headers"))
        let names = Set(exposed.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() })
        #expect(names.isSuperset(of: ["content-range", "content-length", "etag", "accept-ranges"]))
    }

    // MARK: Expect: 100-continue

    /// A client that asks `Expect: 100-continue` waits before sending its body (curl: 1 s). Where nothing reads a body
    /// (a proxied resource: 405; too large: 413), the final answer comes at once, without the body being sent, and the
    /// connection closes (the body may still come; it is never parsed as a request).
    @Test(arguments: [("POST", 1_000, "405"), ("PUT", 5 << 20, "413"), ("GET", 10, "200")])
    func anExpectationIsAnsweredWithTheFinalStatusWhenTheBodyIsNotWanted(_ method: String, length: Int, status: String) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(randomBytes(100), contentType: "video/mp2t", for: "/e.ts")
        let head =
            "\(method) /http/127.0.0.1:\(harness.origin.port)/e.ts HTTP/1.1\r\nHost: x\r\nContent-Length: \(length)\r\nExpect: 100-continue\r\n\r\n"
        // Only the head is sent: without an answer to it, the read times out with nothing (and the connection open). The
        // GET is a miss the origin answers first: 20 s, as a loaded machine running the whole suite took over 5 s.
        let (response, closed) = try await RawHTTP.exchange(port: harness.port, Array(head.utf8), readTimeout: 60)
        #expect(Self.statuses(response) == [status], "\(response.prefix(200))")
        #expect(!response.contains("100 Continue"))
        #expect(response.contains("\r\nConnection: close\r\n"))
        #expect(closed)
    }

    // MARK: Date

    /// RFC 9110 §6.6.1: an origin server with a clock sends `Date` with every 2xx, 3xx and 4xx response. Misses,
    /// hits (the first, rendered, and the replayed ones), ranges, 304, preflights and errors all carry one, of the
    /// current time, and it moves on with the clock.
    @Test func everyResponseCarriesTheDate() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(randomBytes(3_000), contentType: "video/mp2t", for: "/d.ts")
        let url = harness.url("/d.ts")
        // The date lies between the clock before the request and after its answer (it is renewed just after each second),
        // however long a loaded machine takes to answer.
        func date(_ what: String, _ request: () async throws -> ProxyHarness.Response) async throws -> Int64 {
            let before = Int64(Date().timeIntervalSince1970)
            let response = try await request()
            let after = Int64(Date().timeIntervalSince1970)
            let values = response.headers["Date"]
            #expect(values.count == 1, "\(what): \(values)")
            let value = try #require(values.first.flatMap(HTTPDate.parse), "\(what): \(values)")
            #expect(value >= before - 2 && value <= after + 1, "\(what): \(values), asked at \(before), answered by \(after)")
            return value
        }
        _ = try await date("miss") { try await harness.get(url) }
        try await harness.waitForIdle()
        _ = try await date("hit") { try await harness.get(url) }
        let replayed = try await date("replayed hit") { try await harness.get(url) }
        _ = try await date("HEAD hit") { try await harness.get(url, method: .HEAD) }
        _ = try await date("206") { try await harness.get(url, headers: [("Range", "bytes=0-9")]) }
        _ = try await date("304") { try await harness.get(url, headers: [("If-None-Match", "*")]) }
        _ = try await date("preflight") { try await harness.get(url, method: .OPTIONS) }
        _ = try await date("404") { try await harness.get("\(harness.base)/nope") }
        _ = try await date("origin 404") { try await harness.get(harness.url("/missing.ts")) }
        let (raw, _) = try await RawHTTP.exchange(port: harness.port, Array("GARBAGE\r\n\r\n".utf8), readTimeout: 60)
        #expect(raw.hasPrefix("HTTP/1.1 400") && raw.contains("\r\nDate: "), "\(raw.prefix(200))")
        try await Task.sleep(for: .seconds(2))
        #expect(try await date("replayed hit, later") { try await harness.get(url) } > replayed)
    }

    // MARK: Host

    /// RFC 9112 §3.2: an HTTP/1.1 request without `Host`, or any request with two, gets 400 and the connection closes;
    /// an HTTP/1.0 request may go without.
    @Test(arguments: [
        ("GET /healthz HTTP/1.1\r\n\r\n", "400"), ("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400"),
        ("GET /healthz HTTP/1.0\r\n\r\n", "200"), ("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", "200"),
    ])
    func hostIsRequiredOnce(_ request: String, status: String) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let (response, closed) = try await RawHTTP.exchange(port: harness.port, Array(request.utf8), readTimeout: 60)
        #expect(Self.statuses(response) == [status], "\(response.prefix(200))")
        #expect(closed)
    }

    // MARK: Absolute-form targets

    /// RFC 9112 §3.2.2: a server must accept `GET http://host:port/path`. One naming this server (its port; localhost,
    /// the address reached or the listen host) is served as its path; hlscache is not a forward proxy, so one naming
    /// another server, port or scheme is refused.
    @Test func absoluteFormTargetsNamingThisServerAreServed() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = Array("absolute".utf8)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/abs.ts")
        let port = harness.port
        func status(_ target: String, host: String = "127.0.0.1") async throws -> (String, String) {
            let request = "GET \(target) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n"
            let (response, _) = try await RawHTTP.exchange(port: port, Array(request.utf8), readTimeout: 60)
            return (Self.statuses(response).first ?? "none", response)
        }
        let (proxied, response) = try await status("http://127.0.0.1:\(port)/http/127.0.0.1:\(harness.origin.port)/abs.ts")
        #expect(proxied == "200")
        #expect(response.hasSuffix("\r\n\r\nabsolute"))
        #expect(try await status("HTTP://LOCALHOST:\(port)/healthz", host: "whatever").0 == "200")
        #expect(try await status("http://127.0.0.1:\(port)/healthz?x=1").0 == "200")
        for other in [
            "http://example.com:\(port)/healthz", "http://127.0.0.1:\(port == 1 ? 2 : 1)/healthz", "https://127.0.0.1:\(port)/healthz",
            "http://user@127.0.0.1:\(port)/healthz", "http://127.0.0.1/healthz",
        ] {
            #expect(try await status(other).0 == "400", "\(other)")
        }
        #expect(harness.origin.requests(matching: "/abs.ts").count == 1)
    }

    // MARK: Conditional requests

    /// `If-Modified-Since` in any of the three date forms a recipient must accept (RFC 9110 §5.6.7) makes a hit a 304.
    @Test(arguments: ["EEE, dd MMM yyyy HH:mm:ss 'GMT'", "EEEE, dd-MMM-yy HH:mm:ss 'GMT'", "EEE MMM d HH:mm:ss yyyy"])
    func ifModifiedSinceIsUnderstoodInEveryDateForm(_ format: String) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(randomBytes(2_000), contentType: "video/mp2t", for: "/ims.ts")
        let url = harness.url("/ims.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = format
        var since = formatter.string(from: Date().addingTimeInterval(86_400))
        // asctime pads a one-digit day with a space.
        if format.hasPrefix("EEE MMM d ") {
            let parts = since.split(separator: " ", omittingEmptySubsequences: false)
            if parts[2].count == 1 { since = "\(parts[0]) \(parts[1])  \(parts[2]) \(parts[3]) \(parts[4])" }
        }
        let response = try await harness.get(url, headers: [("If-Modified-Since", since)])
        #expect(response.status == 304, "\(since)")
    }

    /// RFC 9110 §13.1.1/§13.1.4: `If-Match` that names no current tag (strong comparison), or, without it, an
    /// `If-Unmodified-Since` older than the object, is a 412 — also where a replayed head could answer.
    @Test func failedPreconditionsOnHitsAre412() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(randomBytes(2_000), contentType: "video/mp2t", for: "/pre.ts")
        let url = harness.url("/pre.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let hit = try await harness.get(url)  // renders the replayed head
        let etag = try #require(hit.headers.first(name: "ETag"))
        let past = HTTPDate.format(Int64(Date().timeIntervalSince1970) - 86_400)
        let future = HTTPDate.format(Int64(Date().timeIntervalSince1970) + 86_400)
        for (headers, status) in [
            ([("If-Match", "\"other\"")], 412), ([("If-Match", "W/\(etag)")], 412), ([("If-Unmodified-Since", past)], 412),
            ([("If-Match", "\"other\", \(etag)")], 200), ([("If-Match", "*")], 200), ([("If-Unmodified-Since", future)], 200),
            ([("If-Unmodified-Since", "not a date")], 200), ([("If-Match", etag), ("If-Unmodified-Since", past)], 200),
        ] {
            let response = try await harness.get(url, headers: headers)
            #expect(response.status == status, "\(headers)")
            if status == 412 { #expect(response.text.contains("preconditionFailed")) }
        }
        let head = try await harness.get(url, headers: [("If-Match", "\"other\"")], method: .HEAD)
        #expect(head.status == 412)
    }

    // MARK: Methods

    /// RFC 9110 §9.1: a method the server does not know is 501; a known one a path does not allow stays 405 with
    /// Allow. llhttp knows WebDAV's methods (the connection goes on); one it does not know ends it (the parser stops).
    @Test func unknownMethodsAre501() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let path = "/http/127.0.0.1:\(harness.origin.port)/m.ts"
        let webdav = "PROPFIND \(path) HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let (known, knownClosed) = try await RawHTTP.exchange(port: harness.port, Array(webdav.utf8), readTimeout: 60)
        #expect(Self.statuses(known) == ["501", "200"], "\(known.prefix(300))")
        #expect(known.contains("notImplemented"))
        #expect(knownClosed)
        for request in ["FOO \(path) HTTP/1.1\r\nHost: x\r\n\r\n", "\r\nBREW /healthz HTTP/1.1\r\nHost: x\r\n\r\n"] {
            let (unknown, closed) = try await RawHTTP.exchange(port: harness.port, Array(request.utf8), readTimeout: 60)
            #expect(Self.statuses(unknown) == ["501"], "\(unknown.prefix(300))")
            #expect(unknown.contains("\r\nConnection: close\r\n"))
            #expect(closed)
        }
        let (garbage, _) = try await RawHTTP.exchange(port: harness.port, Array("GARBAGE\r\n\r\n".utf8), readTimeout: 60)
        #expect(Self.statuses(garbage) == ["400"])
        let delete = try await harness.get(harness.url("/m.ts"), method: .DELETE)
        #expect(delete.status == 405)
        #expect(delete.headers.first(name: "Allow") == "GET, HEAD, OPTIONS")
        #expect(harness.origin.requests.isEmpty)
    }
}
