import Foundation
import HLSCacheCore
import HLSDownloader
import HLSProxy
import HLSTestSupport
import NIOHTTP1
import Testing

/// The boundary "a hostile page in a browser on the same machine" (docs/threat-model.md): the exchanges a browser
/// makes for a page, with the `Origin`, `Sec-Fetch-Site`, `Referer` and Private Network Access headers it sends.
@Suite("Web pages: keys, admin API and content for allowed pages only")
struct WebPageBoundaryTests {
    static let evil = "http://evil.example"
    static let local = "http://localhost:3000"

    /// A harness in front of an AES-128 stream, and the `/keys/…` path of its first key.
    static func protectedStream(proxy: (inout ProxyConfiguration) -> Void = { _ in }) async throws -> (AdminHarness, String) {
        let root = try await Streams.stream("aes128") { try FFmpeg.makeAES128(in: $0) }
        let h = try await AdminHarness(root: root, proxy: proxy)
        let playlist = try await h.request(.GET, h.proxyURL("/index.m3u8"))
        #expect(playlist.status == 200)
        let keyPath = try #require(playlist.text.firstMatch(of: /\/keys\/[0-9a-f]{32}/).map { String($0.output) })
        return (h, keyPath)
    }

    @Test("a key asked for by a page that is not allowed is a 403 without its bytes; players and loopback pages get it")
    func keysGoOnlyToAllowedPages() async throws {
        let (h, keyPath) = try await Self.protectedStream()
        defer { h.shutdownLater() }
        let key = h.base + keyPath
        let native = try await h.request(.GET, key)
        #expect(native.status == 200)
        #expect(native.body.count == 16)
        #expect(native.headers.first(name: "Access-Control-Allow-Origin") == nil, "no page, no CORS grant")

        let refusals: [[(String, String)]] = [
            [("Origin", Self.evil)],
            [("Origin", "null")],
            [("Origin", Self.evil), ("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "cors")],
            // A `<video>` on a hostile page: no Origin, but the browser says the page is another site.
            [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors"), ("Referer", Self.evil + "/watch.html")],
            [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors")],
        ]
        for headers in refusals {
            let refused = try await h.request(.GET, key, headers: headers)
            #expect(refused.status == 403, "\(headers)")
            #expect(refused.json["error"] as? String == "pageNotAllowed", "\(headers)")
            #expect(refused.body.count != 16 && !refused.text.isEmpty, "\(headers)")
            #expect(refused.headers.first(name: "Access-Control-Allow-Origin") == nil, "\(headers)")
        }
        let page = try await h.request(.GET, key, headers: [("Origin", Self.local), ("Sec-Fetch-Site", "cross-site")])
        #expect(page.status == 200)
        #expect(page.body == native.body)
        #expect(page.headers.first(name: "Access-Control-Allow-Origin") == Self.local)
        #expect(page.headers[canonicalForm: "Vary"].contains("Origin"))
        let video = try await h.request(
            .GET, key, headers: [("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Mode", "no-cors"), ("Referer", Self.local + "/")])
        #expect(video.status == 200)
        #expect(video.body == native.body)

        // A key no playlist named, through the generic path: a 16-byte body is handled as a key, refused the same way.
        h.origin.setBody(Array(repeating: 7, count: 16), contentType: "application/octet-stream", for: "/unnamed.bin")
        let unnamed = h.proxyURL("/unnamed.bin")
        let hidden = try await h.request(.GET, unnamed, headers: [("Origin", Self.evil)])
        #expect(hidden.status == 403)
        #expect(hidden.body != Array(repeating: 7, count: 16))
        #expect(try await h.request(.GET, unnamed).body == Array(repeating: 7, count: 16))
        await h.shutdown()
    }

    @Test("content carries a CORS grant for allowed pages only, is sent sandboxed, and preflights follow the same list")
    func contentAndPreflights() async throws {
        let (h, _) = try await Self.protectedStream()
        defer { h.shutdownLater() }
        let url = h.proxyURL("/index.m3u8")
        let hostile = try await h.request(.GET, url, headers: [("Origin", Self.evil), ("Sec-Fetch-Site", "cross-site")])
        #expect(hostile.status == 200, "served, but the browser does not let the page read it")
        #expect(hostile.headers.first(name: "Access-Control-Allow-Origin") == nil)
        #expect(hostile.headers.first(name: "Content-Security-Policy") == "sandbox")
        #expect(hostile.headers.first(name: "X-Content-Type-Options") == "nosniff")
        let allowed = try await h.request(.GET, url, headers: [("Origin", Self.local)])
        #expect(allowed.headers.first(name: "Access-Control-Allow-Origin") == Self.local)
        #expect(allowed.headers.first(name: "Access-Control-Expose-Headers")?.contains("Content-Range") == true)
        #expect(allowed.headers[canonicalForm: "Vary"].contains("Origin"))
        // A segment hit (the replayed-head path) the same way, in either order.
        let segment = h.proxyURL("/p0/seg000.ts")
        for _ in 0..<2 {
            #expect(try await h.request(.GET, segment).headers.first(name: "Access-Control-Allow-Origin") == nil)
            #expect(
                try await h.request(.GET, segment, headers: [("Origin", Self.local)]).headers.first(name: "Access-Control-Allow-Origin")
                    == Self.local)
            #expect(
                try await h.request(.GET, segment, headers: [("Origin", Self.evil)]).headers.first(name: "Access-Control-Allow-Origin")
                    == nil)
        }

        let pna: [(String, String)] = [("Access-Control-Request-Method", "GET"), ("Access-Control-Request-Private-Network", "true")]
        let refused = try await h.request(.OPTIONS, url, headers: [("Origin", Self.evil)] + pna)
        #expect(refused.status == 403)
        #expect(refused.headers.first(name: "Access-Control-Allow-Private-Network") == nil)
        #expect(refused.headers.first(name: "Access-Control-Allow-Origin") == nil)
        let granted = try await h.request(.OPTIONS, url, headers: [("Origin", Self.local)] + pna)
        #expect(granted.status == 204)
        #expect(granted.headers.first(name: "Access-Control-Allow-Private-Network") == "true")
        #expect(granted.headers.first(name: "Access-Control-Allow-Origin") == Self.local)
        let apiPreflight = try await h.request(
            .OPTIONS, h.api("/items"),
            headers: [
                ("Origin", Self.local), ("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "content-type"),
            ])
        #expect(apiPreflight.status == 204)
        #expect(apiPreflight.headers.first(name: "Access-Control-Allow-Methods")?.contains("POST") == true)
        #expect(
            try await h.request(.OPTIONS, h.api("/items"), headers: [("Origin", Self.evil), ("Access-Control-Request-Method", "POST")])
                .status == 403)
        await h.shutdown()
    }

    @Test("with http.allowedWebOrigins set to *, every page is granted as before (and listed origins work without loopback)")
    func explicitLists() async throws {
        let (open, keyPath) = try await Self.protectedStream { $0.webOrigins = try! WebOriginPolicy(parsing: ["*"]) }
        defer { open.shutdownLater() }
        let anyPage = try await open.request(.GET, open.base + keyPath, headers: [("Origin", Self.evil)])
        #expect(anyPage.status == 200)
        #expect(anyPage.headers.first(name: "Access-Control-Allow-Origin") == "*")
        #expect(try await open.request(.GET, open.proxyURL("/index.m3u8")).headers.first(name: "Access-Control-Allow-Origin") == "*")
        await open.shutdown()

        let (listed, listedKey) = try await Self.protectedStream {
            $0.webOrigins = try! WebOriginPolicy(parsing: ["https://player.example"])
        }
        defer { listed.shutdownLater() }
        #expect(try await listed.request(.GET, listed.base + listedKey, headers: [("Origin", "https://player.example")]).status == 200)
        #expect(try await listed.request(.GET, listed.base + listedKey, headers: [("Origin", Self.local)]).status == 403)
        await listed.shutdown()
    }

    @Test("the admin API refuses pages that are not allowed, and state changes need application/json (CSRF)")
    func adminAPIAndCSRF() async throws {
        let (h, _) = try await Self.protectedStream()
        defer { h.shutdownLater() }
        try h.items.insert(DownloadItem(id: "target", url: h.originURL("/index.m3u8"), precacheSeconds: 2))
        for path in ["/items", "/keys", "/status", "/items/target"] {
            let refused = try await h.request(.GET, h.api(path), headers: [("Origin", Self.evil)])
            #expect(refused.status == 403, "\(path)")
            #expect(!refused.text.contains("target") && !refused.text.contains("index.m3u8"), "\(path): \(refused.text)")
        }
        #expect(try await h.request(.GET, h.base + "/", headers: [("Origin", Self.evil)]).status == 403)
        let read = try await h.request(.GET, h.api("/items"), headers: [("Origin", Self.local)])
        #expect(read.status == 200)
        #expect(read.headers.first(name: "Access-Control-Allow-Origin") == Self.local)

        // What a `<form enctype="text/plain">` on any site sends, and what fetch() may send without a preflight.
        for action in ["lock", "pause", "resume", "unlock"] {
            let form = try await h.request(
                .POST, h.api("/items/target/\(action)"), json: "x=y", headers: [("Origin", Self.evil), ("Sec-Fetch-Site", "cross-site")],
                contentType: "text/plain")
            #expect(form.status == 403, "\(action)")
            let plain = try await h.request(.POST, h.api("/items/target/\(action)"), json: "", contentType: "text/plain")
            #expect(plain.status == 415, "\(action)")
            let formEncoded = try await h.request(
                .POST, h.api("/items/target/\(action)"), json: "a=b", contentType: "application/x-www-form-urlencoded")
            #expect(formEncoded.status == 415, "\(action)")
            let noType = try await h.request(.POST, h.api("/items/target/\(action)"), contentType: nil)
            #expect(noType.status == 415, "\(action)")
            let hostileJSON = try await h.request(.POST, h.api("/items/target/\(action)"), json: "{}", headers: [("Origin", Self.evil)])
            #expect(hostileJSON.status == 403, "\(action)")
        }
        #expect(try h.items.item("target")?.locked == false, "nothing changed")
        #expect(try await h.request(.DELETE, h.api("/items/target"), contentType: nil).status == 415)
        #expect(try h.items.item("target") != nil)
        #expect(
            try await h.request(
                .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/index.m3u8"))","id":"x"}"#, contentType: "text/plain"
            ).status == 415)
        #expect(try h.items.item("x") == nil)

        let locked = try await h.request(.POST, h.api("/items/target/lock"), json: "", headers: [("Origin", Self.local)])
        #expect(locked.status == 200, "\(locked.text)")
        #expect(try h.items.item("target")?.locked == true)
        await h.shutdown()
    }

    @Test("the proxy never fetches from itself: its own address is refused at once, nested or not, and a looped request is a 508")
    func noFetchLoops() async throws {
        let (h, _) = try await Self.protectedStream()
        defer { h.shutdownLater() }
        let own = "127.0.0.1:\(h.port)"
        for path in ["/api/v1/keys", "/api/v1/items", "/", "/healthz"] {
            let looped = try await h.request(.GET, h.base + "/http/\(own)\(path)", headers: [("Origin", Self.local)])
            #expect(looped.status == 403, "\(path)")
            #expect(looped.json["error"] as? String == "forbiddenDestination", "\(path)")
            #expect(looped.text.contains("this server itself"), "\(path)")
        }
        let nested = "/http/\(own)" + String(repeating: "/http/\(own)", count: 19) + "/api/v1/items"
        let deep = try await h.request(.GET, h.base + nested)
        #expect(deep.status == 403)
        // The whole loopback range and the wildcard are this server too, when they reach its port.
        for host in ["localhost", "[::ffff:127.0.0.1]", "127.0.0.1."] {
            #expect(try await h.request(.GET, h.base + "/http/\(host):\(h.port)/api/v1/items").status == 403, "\(host)")
        }
        // Another instance's proxy URL that comes back (an origin that is a proxy of this one): Via names this one.
        let via = "1.1 " + h.proxyOrigin.instanceToken
        #expect(via.hasPrefix("1.1 hlscache-"))
        let loop = try await h.request(.GET, h.proxyURL("/index.m3u8"), headers: [("Via", "1.1 other, " + via)])
        #expect(loop.status == 508)
        #expect(h.origin.requests(matching: "/index.m3u8").allSatisfy { $0.headers.contains { $0.0.lowercased() == "via" && $0.1 == via } })
        await h.shutdown()
    }

    @Test("paths are octets: escapes reach the origin exactly as sent and key the cache, malformed ones are a 400, never /")
    func percentEscapes() async throws {
        let root = try await Streams.stream("aes128") { try FFmpeg.makeAES128(in: $0) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        h.origin.setBody(Array("root page".utf8), contentType: "text/html", for: "/")
        let originHost = "127.0.0.1:\(h.origin.port)"
        func raw(_ target: String) async throws -> String {
            try await RawSocket.exchange(
                port: h.port, Array("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8), readTimeout: 60)
        }
        // Escapes that decode to UTF-8 text and escapes that do not (Latin-1 names, raw bytes) are all forwarded as
        // written, each its own object.
        let named = ["/caf%C3%A9.ts", "/caf%E9.ts", "/seg%FF.ts", "/x/%E9/y.ts", "/caf%e9.ts"]
        for path in named { h.origin.setBody(Array("body of \(path)".utf8), contentType: "video/mp2t", for: path) }
        for path in named {
            let miss = try await raw("/http/\(originHost)\(path)")
            #expect(miss.hasPrefix("HTTP/1.1 200"), "\(path): \(miss.prefix(200))")
            #expect(miss.hasSuffix("body of \(path)"), "\(path): \(miss.suffix(100))")
        }
        _ = try await h.eventually("every object stored") { try h.store.usage().count >= named.count ? true : nil }
        for path in named {
            let hit = try await raw("/http/\(originHost)\(path)")
            #expect(hit.contains("X-Cache: HIT"), "\(path): \(hit.prefix(300))")
            #expect(hit.hasSuffix("body of \(path)"), "\(path)")
            #expect(h.origin.requests.filter { $0.path == path }.count == 1, "\(path) fetched once")
        }
        for target in ["/a%G1.ts", "/a%.ts", "/a%2.ts", "/a.ts?x=%G1", "/a.ts?x=%"] {
            let answer = try await raw("/http/\(originHost)\(target)")
            #expect(answer.hasPrefix("HTTP/1.1 400"), "\(target): \(answer.prefix(200))")
            #expect(!answer.contains("root page"), "\(target)")
        }
        #expect(!h.origin.requests.contains { $0.path == "/" }, "the origin's root was never asked for")
        // A query escape that decodes to no text is forwarded as it is.
        h.origin.setBody(Array("query".utf8), contentType: "video/mp2t", for: "/q.ts")
        let query = try await raw("/http/\(originHost)/q.ts?t=%FF%E9")
        #expect(query.hasPrefix("HTTP/1.1 200"), "\(query.prefix(200))")
        #expect(h.origin.requests(containing: "/q.ts").map(\.path) == ["/q.ts?t=%FF%E9"])
        await h.shutdown()
    }

    @Test("a redirect that cannot be followed is a 502; forbidden spellings and a key on a forbidden host are 403")
    func statusesOfRefusals() async throws {
        let (h, _) = try await Self.protectedStream()
        defer { h.shutdownLater() }
        for (path, location) in [
            ("/to-ftp.ts", "ftp://127.0.0.1/seg.ts"), ("/to-creds.ts", "http://user:pw@127.0.0.1:\(h.origin.port)/p0/seg000.ts"),
        ] {
            h.origin.setFault(.redirect(to: location), for: path)
            let answer = try await h.request(.GET, h.proxyURL(path))
            #expect(answer.status == 502, "\(path)")
            #expect(answer.json["error"] as? String == "http", "\(path)")
        }
        for host in ["[::ffff:0:a9fe:a9fe]", "169.254.169.254."] {
            let answer = try await h.request(.GET, h.base + "/http/\(host)/latest/meta-data")
            #expect(answer.status == 403, "\(host): \(answer.text)")
        }
        // A key whose URL names a forbidden host: the playlist is served, the key is refused with 403.
        h.origin.setBody(
            Array(
                "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"http://169.254.169.254/key\"\n#EXTINF:2,\np0/seg000.ts\n#EXT-X-ENDLIST\n"
                    .utf8), for: "/metadata-key.m3u8")
        let playlist = try await h.request(.GET, h.proxyURL("/metadata-key.m3u8"))
        let keyPath = try #require(playlist.text.firstMatch(of: /\/keys\/[0-9a-f]{32}/).map { String($0.output) })
        let key = try await h.request(.GET, h.base + keyPath)
        #expect(key.status == 403, "\(key.text)")
        await h.shutdown()
    }
}
