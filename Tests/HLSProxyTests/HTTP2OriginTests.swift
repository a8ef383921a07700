import Foundation
import HLSTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP2
import Testing

/// Origins that speak HTTP/2 (most CDNs do): a TLS ``TestOrigin`` that offers only `h2` in ALPN and answers each
/// stream through NIO's HTTP/2-to-HTTP/1 codec, so the same request handler and faults apply. The proxy's origin
/// client negotiates HTTP/2 with it (AsyncHTTPClient, `httpVersion = .automatic`).
@Suite struct HTTP2OriginTests {
    /// An HTTP/2-only origin; `streams` counts the streams it was asked to open.
    static func h2Origin(serving dir: URL, _ certs: HTTPSOriginTests.Certificates, streams: NIOLockedValueBox<Int>) throws -> TestOrigin {
        TestOrigin(
            root: dir, channelSetup: try HTTPSOriginTests.tlsSetup(certs, protocols: ["h2"]),
            httpSetup: { channel, makeHandler in
                _ = try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                    mode: .server, connectionConfiguration: .init(), streamConfiguration: .init()
                ) { stream in
                    streams.withLockedValue { $0 += 1 }
                    return stream.eventLoop.makeCompletedFuture {
                        try stream.pipeline.syncOperations.addHandler(HTTP2FramePayloadToHTTP1ServerCodec())
                        try stream.pipeline.syncOperations.addHandler(makeHandler())
                    }
                }
            })
    }

    @Test func segmentsOverHTTP2ArePlayedAndCached() async throws {
        let certs = try await HTTPSOriginTests.certificates()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-h2-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir); try? FileManager.default.removeItem(at: certs.directory) }
        var segments: [[UInt8]] = []
        for index in 0..<4 {
            let bytes = randomBytes(300_000 + index * 1000)
            try Data(bytes).write(to: dir.appendingPathComponent("seg\(index).ts"))
            segments.append(bytes)
        }
        let streams = NIOLockedValueBox(0)
        let origin = try Self.h2Origin(serving: dir, certs, streams: streams)
        try await origin.start()
        let harness = try await ProxyHarness.start(origin: origin, configureOrigin: { $0.extraTrustRootsFile = certs.ca })
        defer { Task { await harness.shutdown() } }
        let base = "\(harness.base)/https/127.0.0.1:\(origin.port)"

        // Four misses at once: streams of one connection (or a few).
        let misses = try await withThrowingTaskGroup(of: (Int, ProxyHarness.Response).self) { group in
            for index in 0..<4 { group.addTask { (index, try await harness.get("\(base)/seg\(index).ts")) } }
            var all: [Int: ProxyHarness.Response] = [:]
            for try await (index, response) in group { all[index] = response }
            return all
        }
        for index in 0..<4 {
            let miss = try #require(misses[index])
            #expect(miss.status == 200)
            #expect(miss.headers.first(name: "X-Cache") == "MISS")
            #expect(sameBytes(miss.body, segments[index]), "seg\(index): \(miss.body.count) bytes")
        }
        #expect(streams.withLockedValue { $0 } == 4, "the origin was asked over HTTP/2")
        try await harness.waitForIdle()
        for index in 0..<4 {
            let hit = try await harness.get("\(base)/seg\(index).ts")
            #expect(hit.headers.first(name: "X-Cache") == "HIT")
            #expect(sameBytes(hit.body, segments[index]), "seg\(index): \(hit.body.count) bytes")
        }
        #expect(origin.requests.count == 4)
    }

    /// A stream that ends early (the origin resets it mid-body) is never a hit, and the player is not handed a
    /// short 200 as if it were whole.
    @Test func aStreamCutMidBodyIsNotCached() async throws {
        let certs = try await HTTPSOriginTests.certificates()
        let (dir, segment) = try HTTPSOriginTests.fixture()
        defer { try? FileManager.default.removeItem(at: dir); try? FileManager.default.removeItem(at: certs.directory) }
        let streams = NIOLockedValueBox(0)
        let origin = try Self.h2Origin(serving: dir, certs, streams: streams)
        try await origin.start()
        origin.setFault(.truncate(bytes: 50_000), for: "/seg0.ts")
        let harness = try await ProxyHarness.start(origin: origin, configureOrigin: { $0.extraTrustRootsFile = certs.ca })
        defer { Task { await harness.shutdown() } }
        let url = "\(harness.base)/https/127.0.0.1:\(origin.port)/seg0.ts"
        // Either an error status before any byte, or the connection closed mid-body (the client sees an error);
        // never a response that ends cleanly.
        do {
            let cut = try await harness.get(url)
            #expect(cut.status >= 500, "a cut stream answered \(cut.status) with \(cut.body.count) of \(segment.count) bytes")
        } catch {}
        try await harness.waitForIdle()
        #expect(try harness.store.usage().count == 0, "nothing cached from a cut stream")
        origin.setFault(nil, for: "/seg0.ts")
        let whole = try await harness.get(url)
        #expect(whole.status == 200)
        #expect(whole.headers.first(name: "X-Cache") == "MISS")
        #expect(sameBytes(whole.body, segment), "\(whole.body.count) bytes")
    }
}
