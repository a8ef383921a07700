import Foundation
import HLSTestSupport
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSProxy

/// The bytes the server writes: body framing (length, chunked, until close), `Connection`, decoder errors and
/// pipelining across streamed answers — the server encodes responses itself (``ResponseEncoding``).
@Suite struct WireFormatTests {
    private static func randomBody(_ count: Int) -> [UInt8] { randomBytes(count) }

    /// Splits a raw response into its head lines and the bytes after the blank line.
    private static func split(_ response: [UInt8]) -> (head: [String], rest: [UInt8])? {
        split(response[...]).map { ($0.head, Array($0.rest)) }
    }

    private static func split(_ response: ArraySlice<UInt8>) -> (head: [String], rest: ArraySlice<UInt8>)? {
        let start = response.startIndex
        guard response.count >= 4,
            let end = (start...(response.endIndex - 4)).first(where: {
                response[$0] == 13 && response[$0 + 1] == 10 && response[$0 + 2] == 13 && response[$0 + 3] == 10
            })
        else { return nil }
        let head = String(decoding: response[start..<end], as: UTF8.self).components(separatedBy: "\r\n")
        return (head, response[(end + 4)...])
    }

    private static func header(_ name: String, in head: [String]) -> String? {
        head.dropFirst().first { $0.lowercased().hasPrefix(name.lowercased() + ":") }.map {
            String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces)
        }
    }

    /// Decodes a chunked body; nil if the framing is wrong or the last chunk is missing.
    private static func dechunk(_ bytes: [UInt8]) -> (body: [UInt8], rest: [UInt8])? {
        var body: [UInt8] = []
        var index = 0
        while true {
            guard let lineEnd = (index..<max(index, bytes.count - 1)).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 }),
                let size = Int(String(decoding: bytes[index..<lineEnd], as: UTF8.self), radix: 16)
            else { return nil }
            let start = lineEnd + 2
            guard start + size + 2 <= bytes.count, bytes[start + size] == 13, bytes[start + size + 1] == 10 else { return nil }
            if size == 0 { return (body, Array(bytes[(start + 2)...])) }
            body += bytes[start..<start + size]
            index = start + size + 2
        }
    }

    @Test func aMissOfUnknownLengthIsChunkedToAnHTTP11Client() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = Self.randomBody(150_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/chunked.ts")
        harness.origin.setFault(.noLength(chunk: 20_000), for: "/chunked.ts")
        let path = "/http/127.0.0.1:\(harness.origin.port)/chunked.ts"
        let request = "GET \(path) HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let (response, closed) = try await RawHTTP.exchangeBytes(port: harness.port, Array(request.utf8), readTimeout: 60)
        let (head, rest) = try #require(Self.split(response))
        #expect(head[0] == "HTTP/1.1 200 OK")
        #expect(Self.header("Transfer-Encoding", in: head) == "chunked")
        #expect(Self.header("Content-Length", in: head) == nil)
        let (decoded, after) = try #require(Self.dechunk(rest))
        #expect(sameBytes(decoded, body))
        // The pipelined request behind it is answered after the last chunk, and the connection then closes.
        #expect(String(decoding: after, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(closed)
    }

    @Test func anHTTP10ClientGetsABodyOfUnknownLengthUntilTheConnectionCloses() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = Self.randomBody(90_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/old.ts")
        harness.origin.setFault(.noLength(chunk: 30_000), for: "/old.ts")
        let request = "GET /http/127.0.0.1:\(harness.origin.port)/old.ts HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
        let (response, closed) = try await RawHTTP.exchangeBytes(port: harness.port, Array(request.utf8), readTimeout: 60)
        let (head, rest) = try #require(Self.split(response))
        #expect(head[0] == "HTTP/1.1 200 OK")
        #expect(Self.header("Transfer-Encoding", in: head) == nil)
        #expect(Self.header("Connection", in: head) == "close")
        #expect(sameBytes(rest, body))
        #expect(closed)
    }

    @Test func anHTTP10KeepAliveRequestIsAnsweredWithKeepAlive() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        // The second request on the same connection is answered only if the first left it open; the second
        // does not ask to keep it, so the server closes after it (no waiting on a read timeout).
        let request = "GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /healthz HTTP/1.0\r\n\r\n"
        let (response, closed) = try await RawHTTP.exchangeBytes(port: harness.port, Array(request.utf8), readTimeout: 60)
        let (head, rest) = try #require(Self.split(response))
        #expect(head[0] == "HTTP/1.1 200 OK")
        #expect(Self.header("Connection", in: head) == "keep-alive")
        let length = try #require(Self.header("Content-Length", in: head).flatMap { Int($0) })
        let (second, _) = try #require(Self.split(Array(rest.dropFirst(length))))
        #expect(second[0] == "HTTP/1.1 200 OK")
        #expect(Self.header("Connection", in: second) == "close")
        #expect(closed)
    }

    @Test func aHeadRequestGetsTheHeadOnlyAndTheConnectionGoesOn() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Self.randomBody(40_000), contentType: "video/mp2t", for: "/head.ts")
        harness.origin.setFault(.noLength(chunk: 10_000), for: "/head.ts")
        let path = "/http/127.0.0.1:\(harness.origin.port)/head.ts"
        let request = "HEAD \(path) HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let (response, closed) = try await RawHTTP.exchangeBytes(port: harness.port, Array(request.utf8), readTimeout: 60)
        let (head, rest) = try #require(Self.split(response))
        #expect(head[0] == "HTTP/1.1 200 OK")
        #expect(String(decoding: rest, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\r\n"), "no body bytes between the two answers")
        #expect(closed)
    }

    @Test(arguments: ["GARBAGE\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n"])
    func aMalformedRequestIsAnswered400AndTheConnectionCloses(_ request: String) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let (response, closed) = try await RawHTTP.exchangeBytes(port: harness.port, Array(request.utf8), readTimeout: 60)
        let (head, rest) = try #require(Self.split(response), "\(request.debugDescription) → \(String(decoding: response, as: UTF8.self))")
        #expect(head[0] == "HTTP/1.1 400 Bad Request")
        #expect(Self.header("Connection", in: head) == "close")
        #expect(String(decoding: rest, as: UTF8.self).contains("\"error\":\"badRequest\""))
        #expect(closed)
    }

    @Test func aBadRequestPipelinedBehindAGoodOneEndsTheConnectionAfterTheGoodAnswer() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let (response, closed) = try await RawHTTP.exchangeBytes(
            port: harness.port, Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n".utf8), readTimeout: 60)
        let text = String(decoding: response, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(text.components(separatedBy: "HTTP/1.1 ").count - 1 == 2, "one answer each: \(text)")
        #expect(text.contains("HTTP/1.1 400 Bad Request"))
        #expect(closed)
    }

    /// A miss (answered later, while the origin answers) heads a pipeline whose last request is malformed: every
    /// valid request queued behind the miss is still answered, in order, then the 400, then the connection closes.
    /// (The requests between used to be dropped, and the miss went out with Connection: close.)
    @Test(arguments: ["GARBAGE\r\n\r\n", "GET /healthz HTTP/1.1\r\nBad Header\r\n\r\n"])
    func aBadRequestPipelinedBehindAMissAndOthersIsAnsweredAfterThemAll(_ bad: String) async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = [UInt8](repeating: UInt8(ascii: "m"), count: 20_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/first.ts")
        harness.origin.setFault(.stall(delay: .milliseconds(300)), for: "/first.ts")
        let request =
            "GET /http/127.0.0.1:\(harness.origin.port)/first.ts HTTP/1.1\r\nHost: x\r\n\r\n"
            + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\n" + bad
        let (response, closed) = try await RawHTTP.exchangeBytes(port: harness.port, Array(request.utf8), readTimeout: 60)
        var rest = response[...]
        var heads: [[String]] = []
        while let (head, after) = Self.split(rest) {
            heads.append(head)
            let length = Self.header("Content-Length", in: head).flatMap { Int($0) } ?? 0
            rest = after.dropFirst(length)
        }
        #expect(heads.map { $0[0] } == ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 404 Not Found", "HTTP/1.1 400 Bad Request"])
        #expect(heads.first.map { Self.header("Connection", in: $0) } == .some(nil), "the miss does not end the connection")
        #expect(heads.last.map { Self.header("Connection", in: $0) } == "close")
        #expect(rest.isEmpty)
        #expect(closed)
    }

    @Test func manyPipelinedHitsAreAnsweredInOrderWithoutNesting() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = Self.randomBody(3_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/p.ts")
        let path = "/http/127.0.0.1:\(harness.origin.port)/p.ts"
        #expect(try await harness.get(harness.url("/p.ts")).status == 200)
        // 2,000 requests in one write: answered one after the other from the queue, each a complete hit.
        let count = 2_000
        var request = String(repeating: "GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n", count: count - 1)
        request += "GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let (response, closed) = try await RawHTTP.exchangeBytes(port: harness.port, Array(request.utf8), readTimeout: 60)
        var rest = response[...]
        var answered = 0
        while let (head, after) = Self.split(rest) {
            guard head[0] == "HTTP/1.1 200 OK", Self.header("Content-Length", in: head) == "3000", after.count >= 3_000,
                after.prefix(3_000).elementsEqual(body)
            else { break }
            answered += 1
            rest = after.dropFirst(3_000)
        }
        #expect(answered == count)
        #expect(rest.isEmpty)
        #expect(closed)
    }

    @Test func encodingFramesEachKindOfResponse() {
        func encode(
            _ status: HTTPResponseStatus, _ headers: HTTPHeaders, length: Int64?, chunked: Bool = true, headOnly: Bool = false,
            connection: String? = nil
        ) -> (String, BodyFraming) {
            var buffer = ByteBuffer()
            let framing = ResponseEncoding.writeHead(
                status: status, headers: headers, bodyLength: length, chunkedAllowed: chunked, headOnly: headOnly, connection: connection,
                into: &buffer)
            return (String(buffer: buffer), framing)
        }
        // The caller's length wins; a complete body without one gets its own.
        #expect(encode(.ok, ["Content-Length": "7"], length: 3) == ("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", .length))
        #expect(encode(.ok, ["X-A": "b"], length: 3) == ("HTTP/1.1 200 OK\r\nX-A: b\r\nContent-Length: 3\r\n\r\n", .length))
        // Unknown length: chunked for HTTP/1.1, until close for HTTP/1.0; a caller's Transfer-Encoding is never sent.
        #expect(
            encode(.ok, ["Transfer-Encoding": "gzip"], length: nil) == ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", .chunked))
        #expect(encode(.ok, [:], length: nil, chunked: false) == ("HTTP/1.1 200 OK\r\n\r\n", .untilClose))
        // No body may follow a 304 or a 204: no length either.
        #expect(
            encode(.notModified, ["ETag": "\"x\"", "content-length": "9"], length: 0)
                == ("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", .none))
        #expect(encode(.noContent, [:], length: 0) == ("HTTP/1.1 204 No Content\r\n\r\n", .none))
        // HEAD: the GET's head, no body.
        #expect(encode(.ok, ["Content-Length": "5"], length: 0, headOnly: true) == ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", .none))
        // The connection's own Connection value replaces the caller's.
        #expect(
            encode(.badRequest, ["Connection": "keep-alive"], length: 0, connection: "close")
                == ("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", .length))
        #expect(encode(.custom(code: 599, reasonPhrase: "Odd"), [:], length: 0).0.hasPrefix("HTTP/1.1 599 Odd\r\n"))
        #expect(ResponseEncoding.equalsIgnoringCase("Content-LENGTH", "content-length"))
        #expect(!ResponseEncoding.equalsIgnoringCase("Content-Lengths", "content-length"))
    }
}
