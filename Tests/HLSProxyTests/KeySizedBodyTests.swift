import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Testing

@testable import HLSProxy

/// A 16- or 32-byte body on the generic path is handled as the key it most likely is, whatever URL it came by:
/// never stored in clear, and sent only to the clients `/keys/` answers (``KeySizedBody``). Spellings of a key's URL
/// the proxy cannot recognise (an extra query parameter, a doubled slash, another name of the host) and keys it has
/// not registered since it started (a restart, a prewarmed cache) all end up here.
@Suite struct KeySizedBodyTests {
    static let key32: [UInt8] = Array("0123456789abcdef0123456789ABCDEF".utf8)

    /// 16 bytes: an AES-128 (or SAMPLE-AES) key; 32: an AES-256 key.
    @Test(arguments: [16, 32])
    func aKeySizedBodyIsNeverStoredAndGoesOnlyToClientsAllowedKeys(size: Int) async throws {
        let key = Array(Self.key32.prefix(size))
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        defer { Task { await harness.shutdown() } }
        let segment = randomBytes(40_000)
        harness.origin.setBody(key, contentType: "application/octet-stream", for: "/a/k.bin")
        harness.origin.setBody(key, contentType: "application/octet-stream", for: "/b/k.bin")
        harness.origin.setFault(.noLength(chunk: 5), for: "/b/k.bin")
        harness.origin.setBody(key, contentType: "text/plain", for: "/c/k.bin")
        harness.origin.setBody(segment, contentType: "video/mp2t", for: "/s.ts")

        // A local client gets it (known length, unknown length, a range of it), and nothing reaches the store.
        for path in ["/a/k.bin", "/b/k.bin", "/c/k.bin"] {
            let response = try await harness.get(harness.url(path))
            #expect(response.status == 200, "\(path)")
            #expect(sameBytes(response.body, key), "\(path)")
        }
        let part = try await harness.get(harness.url("/a/k.bin"), headers: [("Range", "bytes=0-7")])
        #expect(part.status == 206)
        #expect(sameBytes(part.body, Array(key[0...7])))
        try await harness.waitForIdle()
        for path in ["/a/k.bin", "/b/k.bin", "/c/k.bin"] {
            #expect(harness.store.lookup(CacheKey(try OriginURL(harness.originURL(path)))) == nil, "\(path) was stored")
        }
        #expect(!anyFile(under: harness.cacheDirectory, contains: key), "the key reached the disk in plaintext")

        // A copy an older version stored in clear is removed when asked for, and the answer is not stored again.
        let old = CacheKey(try OriginURL(harness.originURL("/c/k.bin")))
        let writer = try harness.store.makeWriter(for: old, expectedLength: Int64(size))
        try writer.write(key)
        _ = try writer.finish(contentType: "application/octet-stream", kind: .key)
        let again = try await harness.get(harness.url("/c/k.bin"))
        #expect(sameBytes(again.body, key))
        #expect(again.headers.first(name: "X-Cache") != "HIT")
        try await harness.waitForIdle()
        #expect(harness.store.lookup(old) == nil)
        #expect(!anyFile(under: harness.cacheDirectory, contains: key), "the old plaintext copy is gone")

        // A client on another network: refused for a known length and an unknown one. (A range of it takes the
        // passthrough relay, which streams on the client's event loop: a test channel's is not the origin client's,
        // so that decision is checked on its own below.)
        for (path, headers) in [("/a/k.bin", [(String, String)]()), ("/b/k.bin", []), ("/c/k.bin", [])] {
            let wire = try await Self.exchangeAsRemoteClient(harness, "/http/127.0.0.1:\(harness.origin.port)\(path)", headers: headers)
            #expect(
                wire.starts(with: Array("HTTP/1.1 403 Forbidden\r\n".utf8)),
                "\(path) \(headers): \(String(decoding: wire.prefix(80), as: UTF8.self))")
            #expect(String(decoding: wire, as: UTF8.self).contains("\"error\":\"forbidden\""))
            #expect(!wire.contains(key), "\(path) \(headers): the key reached the client")
        }
        // Anything else is served to it as usual.
        let media = try await Self.exchangeAsRemoteClient(harness, "/http/127.0.0.1:\(harness.origin.port)/s.ts")
        #expect(media.starts(with: Array("HTTP/1.1 200 OK\r\n".utf8)))
        #expect(Array(media.suffix(segment.count)) == segment)
    }

    @Test func partsOfAKeySizedResourceAreKeySized() {
        func sized(_ status: Int, _ fields: [(String, String)]) -> Bool {
            KeySizedBody.isKeySized(status: status, headers: HTTPHeaders(fields))
        }
        #expect(sized(200, [("Content-Length", "16")]))
        #expect(sized(206, [("Content-Range", "bytes 0-7/16"), ("Content-Length", "8")]))
        #expect(sized(206, [("Content-Range", "bytes 15-15/ 16")]))
        #expect(!sized(206, [("Content-Range", "bytes 0-15/*"), ("Content-Length", "16")]), "a part of a resource of unknown size")
        #expect(!sized(206, [("Content-Range", "bytes 0-15/17")]))
        #expect(!sized(200, [("Content-Length", "17")]))
        #expect(sized(200, [("Content-Length", "32")]), "an AES-256 key")
        #expect(sized(206, [("Content-Range", "bytes 0-7/32")]))
        #expect(!sized(200, [("Content-Length", "33")]))
        #expect(!sized(200, []))
        #expect(!sized(416, [("Content-Range", "bytes */16")]), "no key bytes in a 416")
    }

    /// One request through the proxy's whole request path from a client at 192.168.1.20 (an injected peer address:
    /// the tests have no other network to come from); returns the response's bytes once complete.
    static func exchangeAsRemoteClient(_ harness: ProxyHarness, _ target: String, headers: [(String, String)] = []) async throws -> [UInt8]
    {
        let channel = NIOAsyncTestingChannel()
        channel.remoteAddress = try SocketAddress(ipAddress: "192.168.1.20", port: 40000)
        let services = harness.server.services
        let configuration = harness.server.configuration
        try await channel.testingEventLoop.executeInContext {
            try channel.pipeline.syncOperations.addHandler(
                ProxyHTTPHandler(router: ProxyRouter(services: services), configuration: configuration))
        }
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target, headers: ["Host": "x"])
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        try await channel.writeInbound(HTTPServerRequestPart.head(head))
        try await channel.writeInbound(HTTPServerRequestPart.end(nil))
        var wire: [UInt8] = []
        try await waitUntil("a whole response", interval: .milliseconds(10)) {
            await channel.testingEventLoop.run()
            while let part = try await channel.readOutbound(as: IOData.self) {
                if case .byteBuffer(let buffer) = part { wire += buffer.readableBytesView }
            }
            return Self.isComplete(wire)
        }
        _ = try? await channel.finish()
        return wire
    }

    /// Whether `wire` holds a whole response with a `Content-Length`.
    private static func isComplete(_ wire: [UInt8]) -> Bool {
        guard let end = wire.firstRange(of: Array("\r\n\r\n".utf8)) else { return false }
        let head = String(decoding: wire[..<end.lowerBound], as: UTF8.self).lowercased()
        guard let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
            let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces))
        else { return false }
        return wire.count - end.upperBound >= length
    }
}

extension Array where Element == UInt8 {
    fileprivate func contains(_ needle: [UInt8]) -> Bool { firstRange(of: needle) != nil }
}
