import AsyncHTTPClient
import Foundation
import HLSCacheCore
import HLSTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import HLSProxy

/// The origin connection pool: slow transfers from one host do not hold up other requests for it, and a request that
/// finds every connection busy waits under a limit of its own (`origin.connectionWaitTimeout`), not the connect
/// timeout. Nothing here is timed: the slow transfers stall for good (the origin sends a head and a few bytes, then
/// nothing), so they are provably still in flight when the other request is answered.
@Suite(.serialized)
struct OriginPoolTests {
    static let stalled = 16

    /// A client that can hold many requests to the proxy at once (AsyncHTTPClient's own pool keeps 8 per host).
    static func wideClient() -> HTTPClient {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 64
        return HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), configuration: configuration)
    }

    /// How many of the first `count` stalled transfers (``stall(_:on:client:)``) are downloads in flight in the proxy.
    static func inFlight(_ count: Int, on harness: ProxyHarness) throws -> Int {
        try (0..<count).filter { index in
            let url = try OriginURL(harness.originURL("/slow\(index).ts"))
            return harness.server.services.fetches.existing(FetchKey(key: CacheKey(url), url: url, cacheable: true)) != nil
        }.count
    }

    /// Starts `count` requests whose origin transfers stall after 1,000 bytes, and waits (bounded) until every one
    /// of them reached the origin and is in flight in the proxy. Returns the open responses (their bodies unread).
    static func stall(_ count: Int, on harness: ProxyHarness, client: HTTPClient) async throws -> [HTTPClientResponse] {
        for index in 0..<count {
            harness.origin.setBody([UInt8](repeating: UInt8(index), count: 100_000), contentType: "video/mp2t", for: "/slow\(index).ts")
            harness.origin.setFault(.stallAfter(bytes: 1000), for: "/slow\(index).ts")
        }
        let responses = try await withThrowingTaskGroup(of: HTTPClientResponse.self) { group in
            for index in 0..<count {
                group.addTask {
                    try await client.execute(HTTPClientRequest(url: harness.url("/slow\(index).ts")), timeout: .seconds(600))
                }
            }
            var responses: [HTTPClientResponse] = []
            for try await response in group { responses.append(response) }
            return responses
        }
        try await waitUntil(
            "\(count) stalled transfers in flight (the origin was asked \(harness.origin.requests(containing: "/slow").count) times, the proxy has \(harness.server.services.fetches.count) downloads)"
        ) { harness.origin.requests(containing: "/slow").count >= count && harness.server.services.fetches.count >= count }
        return responses
    }

    @Test func sixteenStalledTransfersFromOneHostDoNotHoldUpAnotherRequestForIt() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { _ in
        } configureOrigin: { origin in
            // The stalled transfers must outlive the test: no read timeout ends them.
            origin.readTimeout = .seconds(600)
            // AsyncHTTPClient's default: a request waiting for a pooled connection failed after this.
            origin.connectTimeout = .seconds(10)
        }
        let client = Self.wideClient()
        defer {
            Task {
                try? await client.shutdown()
                await harness.shutdown()
            }
        }
        #expect(harness.originClient.configuration.maxConnectionsPerHost >= 64)
        let responses = try await Self.stall(Self.stalled, on: harness, client: client)
        #expect(responses.count == Self.stalled && responses.allSatisfy { $0.status == .ok })
        #expect(
            harness.server.services.fetches.count == Self.stalled,
            "the stalled transfers are in flight: \(harness.server.services.fetches.count)")

        harness.origin.setBody(Array("small".utf8), contentType: "video/mp2t", for: "/small.ts")
        let small = try await harness.get(harness.url("/small.ts"))
        #expect(small.status == 200)
        #expect(small.text == "small")
        // Answered while the sixteen were still stalled, not after one of them ended.
        #expect(harness.origin.requests(containing: "/slow").count == Self.stalled)
        // (The small one's fetch may still be finishing its cache entry: only the stalled ones are counted.)
        #expect(try Self.inFlight(Self.stalled, on: harness) == Self.stalled)
        #expect(harness.originClient.connectionWaits.waits == 0, "nothing had to wait for a connection")
    }

    @Test func aRequestThatFindsEveryConnectionBusyWaitsItsOwnLimitAndIsCounted() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { _ in
        } configureOrigin: { origin in
            origin.readTimeout = .seconds(600)
            origin.maxConnectionsPerHost = 2
            // Its own limit, shorter than the connect timeout (the harness's 60 s): the answer is 503 busy, not a 504 timeout.
            origin.connectionWaitTimeout = .seconds(2)
        }
        let client = Self.wideClient()
        defer {
            Task {
                try? await client.shutdown()
                await harness.shutdown()
            }
        }
        _ = try await Self.stall(2, on: harness, client: client)
        #expect(harness.server.services.fetches.count == 2)

        harness.origin.setBody(Array("small".utf8), contentType: "video/mp2t", for: "/small.ts")
        let busy = try await harness.get(harness.url("/small.ts"))
        #expect(busy.status == 503, "\(busy.status) \(busy.text)")
        #expect(busy.text.contains("\"busy\""), "\(busy.text)")
        #expect(harness.origin.requests(matching: "/small.ts").isEmpty, "the origin was not asked")
        let waits = harness.originClient.connectionWaits
        #expect(waits.waits >= 1 && waits.timeouts >= 1 && waits.waiting == 0)

        let metrics = try await harness.get("\(harness.base)/metrics").text
        #expect(
            metrics.contains("hlscache_origin_connection_waits_total \(waits.waits)"),
            "\(metrics.split(separator: "\n").filter { $0.contains("waits") })")
        #expect(metrics.contains("hlscache_origin_errors_total{code=\"busy\"} 1"))
        #expect(metrics.contains("hlscache_origin_requests_waiting 0"))
    }
}
