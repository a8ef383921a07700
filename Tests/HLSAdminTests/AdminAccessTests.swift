import Foundation
import HLSKeys
import HLSTestSupport
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSAdmin
@testable import HLSProxy

@Suite("Admin API: access control and bad requests")
struct AdminAccessTests {
    static func emptyRoot() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-admin-empty-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    static func request(from peer: String, headers: HTTPHeaders = [:]) throws -> ProxyRequest {
        ProxyRequest(
            head: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/api/v1/items", headers: headers),
            remoteAddress: try SocketAddress(ipAddress: peer, port: 40000))
    }

    @Test("peers outside loopback and api.allow are refused; api.allow admits its network")
    func peerPolicy() throws {
        let closed = AdminAccess(configuration: AdminConfiguration())
        #expect(closed.check(try Self.request(from: "192.168.1.20"), queryToken: nil)?.httpStatus == 403)
        #expect(closed.check(try Self.request(from: "10.0.0.1"), queryToken: nil)?.code == "forbidden")
        #expect(closed.check(try Self.request(from: "127.0.0.1"), queryToken: nil) == nil)
        #expect(closed.check(try Self.request(from: "::1"), queryToken: nil) == nil)
        let lan = AdminAccess(configuration: AdminConfiguration(allowedNetworks: [try #require(IPNetwork("192.168.1.0/24"))]))
        #expect(lan.check(try Self.request(from: "192.168.1.20"), queryToken: nil) == nil)
        #expect(lan.check(try Self.request(from: "192.168.2.20"), queryToken: nil)?.httpStatus == 403)
        // A token does not open the API to other networks.
        let token = AdminAccess(configuration: AdminConfiguration(token: "0123456789abcdef0123"))
        #expect(
            token.check(try Self.request(from: "192.168.1.20", headers: ["Authorization": "Bearer 0123456789abcdef0123"]), queryToken: nil)?
                .httpStatus == 403)
        #expect(AdminAccess.constantTimeEquals(Array("abc".utf8), Array("abc".utf8)))
        #expect(!AdminAccess.constantTimeEquals(Array("abc".utf8), Array("abd".utf8)))
        #expect(!AdminAccess.constantTimeEquals(Array("abc".utf8), Array("abcd".utf8)))
        #expect(!AdminAccess.constantTimeEquals(Array("".utf8), Array("a".utf8)))
    }

    @Test("with api.token: no token or a wrong one is 401, the right one (header, or access_token on /events) passes")
    func bearerToken() async throws {
        let token = "s3cret-token-0123456789"
        let h = try await AdminHarness(root: try Self.emptyRoot()) { $0.token = token }
        defer { h.shutdownLater() }
        let missing = try await h.request(.GET, h.api("/items"))
        #expect(missing.status == 401)
        #expect(missing.json["error"] as? String == "unauthorized")
        #expect(missing.headers.first(name: "WWW-Authenticate")?.hasPrefix("Bearer") == true)
        let wrong = try await h.request(.GET, h.api("/items"), headers: [("Authorization", "Bearer s3cret-token-0123456788")])
        #expect(wrong.status == 401)
        let query = try await h.request(.GET, h.api("/items?access_token=\(token)"))
        #expect(query.status == 401, "the query token is for EventSource on /events only")
        let right = try await h.request(.GET, h.api("/items"), headers: [("Authorization", "Bearer \(token)")])
        #expect(right.status == 200)
        let events = EventRecorder(client: h.client, url: h.api("/events?access_token=\(token)"))
        _ = try await h.eventually("the subscriber") { h.hub.subscriberCount == 1 ? true : nil }
        #expect(try await h.eventually("the event stream's head") { events.responseStatus } == 200)
        let refused = EventRecorder(client: h.client, url: h.api("/events?access_token=nope"))
        _ = try await h.eventually("the refusal") { refused.responseStatus }
        #expect(refused.responseStatus == 401)
        #expect(h.hub.subscriberCount == 1)
        // The console itself needs no token (it carries none of the data).
        let page = try await h.request(.GET, h.base + "/")
        #expect(page.status == 200)
        await events.stop()
        await refused.stop()
        await h.shutdown()
    }

    @Test("without a token, a request naming another host (DNS rebinding) is refused")
    func hostCheck() async throws {
        let h = try await AdminHarness(root: try Self.emptyRoot())
        defer { h.shutdownLater() }
        let rebound = try await h.request(.GET, h.api("/items"), headers: [("Host", "evil.example:\(h.port)")])
        #expect(rebound.status == 403)
        let local = try await h.request(.GET, h.api("/items"), headers: [("Host", "localhost:\(h.port)")])
        #expect(local.status == 200)
        await h.shutdown()
    }

    @Test("bad JSON, unknown or wrong options, no JSON type, a huge body, unknown items and endpoints get honest errors")
    func badRequests() async throws {
        let h = try await AdminHarness(root: try Self.emptyRoot())
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let url = h.originURL("/master.m3u8")
        let cases: [(String, String?, Int, String)] = [
            ("{not json", "application/json", 400, "badRequest"),
            (#"{"seconds":4}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","color":"red"}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","seconds":99999}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","seconds":"4"}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","lock":1}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","expires":"soon"}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","id":"../etc"}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","variants":"many"}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","headers":["no colon"]}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","rate":"fast"}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)","dailyLimit":0}"#, "application/json", 400, "badRequest"),
            (#"{"url":"ftp://example.com/a.m3u8"}"#, "application/json", 400, "badRequest"),
            (#"{"url":"\#(url)"}"#, "text/plain", 415, "unsupportedMediaType"),
            (#"{"url":"\#(url)"}"#, nil, 415, "unsupportedMediaType"),
        ]
        for (body, type, status, code) in cases {
            let response = try await h.request(.POST, h.api("/items"), json: body, contentType: type)
            openAPI.add("POST", "/items", response)
            #expect(response.status == status, "\(body) as \(type ?? "no type"): \(response.text)")
            #expect(response.json["error"] as? String == code, "\(body)")
            #expect((response.json["message"] as? String)?.isEmpty == false)
        }
        // An array is many items at once (POST /items with a list): entries that are not objects are each refused.
        let many = try await h.request(.POST, h.api("/items"), json: "[1,2]")
        openAPI.add("POST", "/items", many)
        #expect(many.status == 200 && many.json["refused"] as? Int == 2 && many.json["created"] as? Int == 0, "\(many.text)")
        // A bad rendition selection names the JSON field, not the `hlscache fetch` flag of the same meaning.
        for (field, value) in [("variants", "many"), ("audio", ","), ("subtitles", ",")] {
            let response = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(url)","\#(field)":"\#(value)"}"#)
            let message = response.json["message"] as? String ?? ""
            #expect(response.status == 400 && message.hasPrefix("\"\(field)\": expected "), "\(field): \(response.text)")
            #expect(message.hasSuffix("not \"\(value)\""), "\(field): \(message)")
            #expect(!message.contains("--"), "\(field): \(message)")
        }
        #expect(try h.items.items().isEmpty, "no bad request recorded an item")
        // A body past 64 KiB is refused from its Content-Length, before it is read.
        let head = "POST /api/v1/items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n"
        let tooLarge = try await RawSocket.exchange(port: h.port, Array(head.utf8))
        #expect(tooLarge.hasPrefix("HTTP/1.1 413"), "\(tooLarge)")
        #expect(tooLarge.contains(#""error":"payloadTooLarge""#))
        for action in ["pause", "resume", "lock", "unlock"] {
            let response = try await h.request(.POST, h.api("/items/nope/\(action)"))
            openAPI.add("POST", "/items/{id}/\(action)", response)
            #expect(response.status == 404)
        }
        let deleteMissing = try await h.request(.DELETE, h.api("/items/nope"))
        openAPI.add("DELETE", "/items/{id}", deleteMissing)
        #expect(deleteMissing.status == 404)
        #expect(try await h.request(.GET, h.api("/nothing")).status == 404)
        let method = try await h.request(.PUT, h.api("/items"))
        #expect(method.status == 405 && method.headers.first(name: "Allow") == "GET, HEAD, POST")
        // No page asked (no Origin): no CORS headers.
        #expect(method.headers.first(name: "Access-Control-Allow-Origin") == nil)
        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
    }

    @Test("the OpenAPI check fails on a response that does not match the spec")
    func validatorRejectsWrongResponses() async throws {
        let openAPI = OpenAPIRecords()
        var body: [String: Any] = [
            "id": "a", "url": "http://x/a.m3u8", "state": "sleeping", "seconds": 0, "locked": false, "bytesDone": 0, "bytesTotal": 0,
            "segmentsDone": 0, "segmentsTotal": 0, "percent": 0, "renditions": [String](), "headers": [String](),
            "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
        ]
        openAPI.add(
            "GET", "/items/{id}",
            AdminHarness.Response(status: 200, headers: [:], body: Array(try JSONSerialization.data(withJSONObject: body))))
        body["state"] = "queued"
        body["secret"] = "leak"
        openAPI.add(
            "POST", "/items",
            AdminHarness.Response(status: 201, headers: [:], body: Array(try JSONSerialization.data(withJSONObject: body))))
        openAPI.add("GET", "/keys", AdminHarness.Response(status: 418, headers: [:], body: Array(#"{"keys":[]}"#.utf8)))
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 1)
        #expect(output.contains("'sleeping' is not one of"))
        #expect(output.contains("secret"))
        #expect(output.contains("status not documented"))
        #expect(output.contains("3 responses checked,") && !output.contains(", 0 mismatches"), "\(output)")
        #expect(output.contains("#0 ") && output.contains("#1 ") && output.contains("#2 "), "each wrong response is reported: \(output)")
    }

    /// `curl -H 'Expect: 100-continue' --data-binary @item.json …/api/v1/items` waits for `100 Continue` before sending
    /// the body (1 s, then it sends anyway): the API reads bodies, so the server says so at once, then answers the
    /// request with its body.
    @Test("a POST with Expect: 100-continue gets 100 Continue before its body is sent, then its answer")
    func expectContinue() async throws {
        let harness = try await AdminHarness(root: try Self.emptyRoot())
        defer { harness.shutdownLater() }
        let body = Array("{\"url\": \"\(harness.originURL("/none/master.m3u8"))\", \"id\": \"expect-1\"}".utf8)
        let head = Array(
            ("POST /api/v1/items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n"
                + "Expect: 100-continue\r\nConnection: close\r\n\r\n").utf8)
        let port = harness.port
        let (interim, final) = try await offThread { () throws -> (String, String) in
            let fd = try RawSocket.connect(port: port)
            defer { close(fd) }
            var timeout = timeval(tv_sec: 60, tv_usec: 0)  // a bound, not a deadline: both reads end on an event (the interim, the close)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            RawSocket.send(fd, head)
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = recv(fd, &buffer, buffer.count, 0)
            let interim = n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : ""
            RawSocket.send(fd, body)
            var rest: [UInt8] = []
            while true {
                let n = recv(fd, &buffer, buffer.count, 0)
                guard n > 0 else { break }
                rest.append(contentsOf: buffer[0..<n])
            }
            return (interim, String(decoding: rest, as: UTF8.self))
        }
        #expect(interim.hasPrefix("HTTP/1.1 100 Continue\r\n\r\n"), "\(interim.prefix(80).debugDescription)")
        let answer = interim.dropFirst("HTTP/1.1 100 Continue\r\n\r\n".count) + final
        #expect(answer.hasPrefix("HTTP/1.1 201 "), "\(answer.prefix(200))")
        #expect(answer.contains("expect-1"))
        await harness.shutdown()
    }
}
