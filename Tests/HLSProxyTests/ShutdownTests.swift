import Foundation
import HLSTestSupport
import NIOCore
import Testing

@testable import HLSProxy

/// The in-process drain: `ProxyServer.shutdown(gracePeriod:)`.
@Suite struct ShutdownTests {
    @Test func drainFinishesResponsesClosesIdleConnectionsAndRefusesNewOnes() async throws {
        let dir = try MetricsTests.originDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // The server's idle timeout is far beyond the client's wait, so only the shutdown can close the idle connection.
        let harness = try await ProxyHarness.start(
            serving: dir,
            configure: {
                $0.prefetchSegments = 0
                $0.idleTimeout = .seconds(900)
            })
        // About a second of body: 70,000 bytes in 8 KiB pieces, 100 ms apart.
        harness.origin.setFault(.slow(chunk: 8192, delay: .milliseconds(100)), for: "/seg0.ts")
        let port = harness.port

        // An idle keep-alive connection: its request is answered, then it waits for the next one.
        let idle = Task {
            try await RawHTTP.exchange(port: port, Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8), readTimeout: 600)
        }
        let streaming = Task { try await harness.get(harness.url("/seg0.ts")) }
        // Both connections are open (a loaded machine may start the idle one late) and the origin is streaming.
        try await waitUntil("both connections open and the origin streaming", interval: .milliseconds(10)) {
            !harness.origin.requests(matching: "/seg0.ts").isEmpty && harness.server.openConnections >= 2
        }
        try await Task.sleep(for: .milliseconds(200))

        // A grace period far beyond the second of body (it costs nothing: the drain ends when the response does).
        let forced = await harness.server.shutdown(gracePeriod: .seconds(300))
        #expect(forced == 0, "every response finished within the grace period")
        let response = try await streaming.value
        #expect(response.status == 200)
        #expect(response.body == [UInt8](try Data(contentsOf: dir.appendingPathComponent("seg0.ts"))))
        let (idleResponse, closedByPeer) = try await idle.value
        #expect(idleResponse.hasPrefix("HTTP/1.1 200"))
        #expect(closedByPeer, "the idle keep-alive connection was closed by the shutdown, not by its timeout")
        await #expect(throws: (any Error).self) {
            _ = try await RawHTTP.exchange(port: port, Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8), readTimeout: 2)
        }
        await harness.shutdown()
    }

    @Test func responsesStillRunningAtTheDeadlineAreCutOff() async throws {
        let dir = try MetricsTests.originDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let harness = try await ProxyHarness.start(serving: dir, configure: { $0.prefetchSegments = 0 })
        // About 200 seconds of body: still running at the deadline however starved this process is.
        harness.origin.setFault(.slow(chunk: 1024, delay: .seconds(3)), for: "/seg0.ts")
        let streaming = Task { try await harness.get(harness.url("/seg0.ts")) }
        try await waitUntil("the origin to be asked for the segment", interval: .milliseconds(10)) {
            !harness.origin.requests(matching: "/seg0.ts").isEmpty
        }
        try await Task.sleep(for: .milliseconds(200))
        let forced = await harness.server.shutdown(gracePeriod: .milliseconds(300))
        #expect(forced == 1)
        await #expect(throws: (any Error).self, "the client sees an incomplete body") { _ = try await streaming.value }
        #expect(harness.server.openConnections == 0)
        await harness.shutdown()
    }

    /// A connection the server accepted but that had not asked anything when the drain began (a player that connected
    /// in the instant of a take-over) is answered — once, with `Connection: close` — not closed unanswered; one that
    /// never asks is closed after `drainFirstRequestWindow`.
    @Test func aConnectionAcceptedBeforeTheDrainIsAnsweredNotDropped() async throws {
        let dir = try MetricsTests.originDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let harness = try await ProxyHarness.start(
            serving: dir,
            configure: {
                $0.prefetchSegments = 0
                $0.idleTimeout = .seconds(900)
                $0.drainFirstRequestWindow = .seconds(600)  // far beyond the test's own pace on a loaded machine
            })
        let port = harness.port
        let fresh = try StalledClient(port: port, request: [])
        #expect(try await Self.eventually { harness.server.openConnections == 1 }, "the connection was never accepted")
        harness.server.beginShutdown()
        #expect(
            try await Self.eventually {
                guard let descriptor = try? LoopbackSocket.connect(port: port) else { return true }
                close(descriptor)
                return false
            }, "the server still accepts connections")
        #expect(harness.server.openConnections == 1, "the connection accepted before the drain was closed unanswered")
        try fresh.send(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        let answer = String(decoding: try await fresh.readResponse(), as: UTF8.self).lowercased()
        #expect(answer.hasPrefix("http/1.1 200"), "\(answer)")
        #expect(answer.contains("connection: close"), "\(answer)")
        #expect(try await Self.eventually { harness.server.openConnections == 0 }, "closed after its answer")
        fresh.close()
        await harness.shutdown()

        // A connection that never asks anything is closed once the window has passed.
        let quiet = try await ProxyHarness.start(
            serving: dir,
            configure: {
                $0.idleTimeout = .seconds(900)
                $0.drainFirstRequestWindow = .milliseconds(100)
            })
        let silent = try StalledClient(port: quiet.port, request: [])
        #expect(try await Self.eventually { quiet.server.openConnections == 1 })
        quiet.server.beginShutdown()
        #expect(try await Self.eventually { quiet.server.openConnections == 0 }, "a silent connection held the drain")
        silent.close()
        await quiet.shutdown()
    }

    /// Waits (a generous bound, not a measurement) until `condition` holds.
    private static func eventually(_ condition: () throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(300)
        while try !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        return try condition()
    }
}
