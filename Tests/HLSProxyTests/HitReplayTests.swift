import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import NIOCore
import Testing

@testable import HLSProxy

/// A whole-object hit is answered from a head rendered once (``HitReplay``): it must say exactly what the
/// ordinary path says, and never outlive the object it was rendered for.
@Suite struct HitReplayTests {
    private static func randomBody(_ count: Int) -> [UInt8] { randomBytes(count) }

    /// Every header but `Date` (the clock's, not the object's), in order, as name/value pairs.
    private static func headerList(_ response: ProxyHarness.Response) -> [String] {
        response.headers.filter { $0.name.lowercased() != "date" }.map { "\($0.name): \($0.value)" }
    }

    @Test func replayedHitsSayWhatTheFirstHitSaid() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = Self.randomBody(70_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/r.ts")
        let url = harness.url("/r.ts")
        #expect(sameBytes(try await harness.get(url).body, body))
        try await harness.waitForIdle()
        let first = try await harness.get(url)  // the ordinary path; renders the replay
        let second = try await harness.get(url)  // replayed
        let third = try await harness.get(url)
        #expect(first.headers.first(name: "X-Cache") == "HIT")
        #expect(Self.headerList(second) == Self.headerList(first))
        #expect(Self.headerList(third) == Self.headerList(first))
        #expect(sameBytes(second.body, body) && sameBytes(third.body, body))
        let head = try await harness.get(url, method: .HEAD)
        #expect(head.status == 200)
        #expect(head.body.isEmpty)
        #expect(Self.headerList(head) == Self.headerList(first))
        #expect([first, second, third, head].allSatisfy { $0.headers["Date"].count == 1 })
        #expect(harness.origin.requests(matching: "/r.ts").count == 1)
    }

    @Test func aConnectionThatClosesStillSaysSo() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = Self.randomBody(5_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/c.ts")
        let url = harness.url("/c.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        _ = try await harness.get(url)
        _ = try await harness.get(url)
        let path = "/http/127.0.0.1:\(harness.origin.port)/c.ts"
        let (response, closed) = try await RawHTTP.exchange(
            port: harness.port, Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), readTimeout: 60)
        #expect(response.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(response.contains("\r\nConnection: close\r\n"))
        #expect(response.contains("\r\nX-Cache: HIT\r\n"))
        #expect(closed)
    }

    @Test func aReplacedOrRemovedObjectIsNeverAnsweredWithTheOldHead() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let original = Self.randomBody(20_000)
        harness.origin.setBody(original, contentType: "video/mp2t", for: "/v.ts")
        let url = harness.url("/v.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let before = try await harness.get(url)
        #expect(sameBytes(try await harness.get(url).body, original))  // replayed

        // Another writer (hlscache fetch, a new origin version) replaces the object: new bytes, new length, new tag.
        let key = CacheKey(try OriginURL(harness.originURL("/v.ts")))
        let replacement = Self.randomBody(30_000)
        let writer = try harness.store.makeWriter(for: key, expectedLength: Int64(replacement.count))
        try writer.write(replacement)
        _ = try writer.finish(contentType: "video/mp2t", kind: .segment)
        let after = try await harness.get(url)
        #expect(sameBytes(after.body, replacement))
        #expect(after.headers.first(name: "Content-Length") == String(replacement.count))
        #expect(after.headers.first(name: "ETag") != before.headers.first(name: "ETag"))
        #expect(sameBytes(try await harness.get(url).body, replacement))  // the new object's own replay

        // Removed: the next request goes to the origin again.
        #expect(try harness.store.remove(key))
        let fresh = Self.randomBody(9_000)
        harness.origin.setBody(fresh, contentType: "video/mp2t", for: "/v.ts")
        let miss = try await harness.get(url)
        #expect(sameBytes(miss.body, fresh))
        #expect(miss.headers.first(name: "X-Cache") == "MISS")
        #expect(harness.origin.requests(matching: "/v.ts").count == 2)
    }

    @Test func rangeAndConditionalRequestsAreNotReplayed() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let body = Self.randomBody(10_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/q.ts")
        let url = harness.url("/q.ts")
        _ = try await harness.get(url)
        try await harness.waitForIdle()
        let hit = try await harness.get(url)
        _ = try await harness.get(url)
        let etag = try #require(hit.headers.first(name: "ETag"))
        let partial = try await harness.get(url, headers: [("range", "bytes=10-19")])
        #expect(partial.status == 206)
        #expect(sameBytes(partial.body, Array(body[10...19])))
        let notModified = try await harness.get(url, headers: [("IF-NONE-MATCH", etag)])
        #expect(notModified.status == 304)
        #expect(notModified.body.isEmpty)
        let request = ProxyRequest(head: .init(version: .http1_1, method: .GET, uri: "/", headers: ["If-Modified-Since": "x"]))
        #expect(!request.isPlainFetch)
        #expect(
            ProxyRequest(head: .init(version: .http1_1, method: .GET, uri: "/", headers: ["Referer": "x", "Icy-MetaData": "1"]))
                .isPlainFetch)
    }
}
