import Foundation
import HLSAdmin
import HLSCrypto
import HLSDownloader
import HLSTestSupport
import NIOCore
import NIOPosix
import Testing

/// `server` events (PCD `hlsServerStarted`/stopped) on the real binary: `started` opens every `/events` stream,
/// `stopping` closes it at SIGTERM, and a webhook receiver on 127.0.0.1 gets both, signed; a receiver that never
/// answers does not hold the shutdown, its `stopping` kept for the next start (docs/api.md#events).
@Suite struct ServerEventsTests {
    static let secret = "a-webhook-secret-of-some-length"

    /// `serve` on a fresh port with webhooks to `hook`; returns the process and its base URL.
    /// `stopWait`: the bounds of the stop (the streams' `shutdown.grace`, the webhooks' `stopWait`): long where the test
    /// waits for what they let through, so a slow machine cannot cut it short.
    private static func startServe(cache: URL, hook: String, attempts: Int = 5, stopWait: String = "90s") async throws -> (
        ChildProcess, String
    ) {
        try await CLI.startServe(
            cache: cache.path, arguments: ["--shutdown-grace", stopWait],
            environment: [
                "HLSCACHE_WEBHOOKS_URLS": hook, "HLSCACHE_WEBHOOKS_SECRET": secret, "HLSCACHE_WEBHOOKS_ATTEMPTS": String(attempts),
                "HLSCACHE_WEBHOOKS_STOP_WAIT": stopWait,
            ])
    }

    /// Waits for the process to end (bounded at 90 s) and returns whether it did.
    private static func exited(_ process: ChildProcess) async throws -> Bool {
        try await CLI.exited(process)
    }

    /// The `data:` objects of the `event: server` frames in `text`.
    private static func serverEvents(_ text: String) -> [[String: Any]] {
        var result: [[String: Any]] = []
        var isServer = false
        for line in text.split(separator: "\n") {
            if line.hasPrefix("event: ") { isServer = line == "event: server" }
            if isServer, line.hasPrefix("data: "),
                let object = try? JSONSerialization.jsonObject(with: Data(line.dropFirst(6).utf8)) as? [String: Any]
            {
                result.append(object)
            }
        }
        return result
    }

    @Test func streamsOpenWithStartedAndEndWithStoppingAndWebhooksGetBoth() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-server-events-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let receiver = WebhookReceiver(failures: 0)
        try await receiver.start()
        let (process, base) = try await Self.startServe(cache: cache, hook: receiver.url)
        defer { if process.isRunning { process.terminate() } }

        // Two subscribers: every type, and one that asks for state changes only (no server events for it).
        let curl = ChildProcess()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-sN", "--max-time", "120", base + "/api/v1/events"]
        let events = Pipe()
        curl.standardOutput = events
        try curl.run()
        defer { if curl.isRunning { curl.terminate() } }
        let stateOnly = ChildProcess()
        stateOnly.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        stateOnly.arguments = ["-sN", "--max-time", "120", base + "/api/v1/events?type=state"]
        let stateEvents = Pipe()
        stateOnly.standardOutput = stateEvents
        try stateOnly.run()
        defer { if stateOnly.isRunning { stateOnly.terminate() } }

        // `started` is the first event of the stream.
        let opening = await onOwnThread { () -> String in
            var text = ""
            let handle = events.fileHandleForReading
            while Self.serverEvents(text).isEmpty {
                let data = handle.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            return text
        }
        let firstEvent = opening.split(separator: "\n").first { $0.hasPrefix("event: ") }
        #expect(firstEvent == "event: server", "\(opening)")
        let started = try #require(Self.serverEvents(opening).first)
        #expect(started["event"] as? String == "started")
        #expect((started["pid"] as? NSNumber)?.int32Value == process.processIdentifier)
        #expect(started["startedAt"] is String)
        // The state-only subscriber is connected (its hello read) before the stop.
        #expect(await onOwnThread { readFirstLine(of: stateEvents) }.contains("retry:"))

        // The webhook receiver got `started` (once, at start).
        _ = try await WebhookOutboxTests.eventually("the started webhook") {
            receiver.requests.contains { $0.json["type"] as? String == "server" && $0.json["event"] as? String == "started" } ? true : nil
        }

        // SIGTERM: `stopping` reaches the stream before it ends (curl sees the end of the body and exits).
        kill(process.processIdentifier, SIGTERM)
        let rest = await onOwnThread { String(decoding: events.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        let closing = Self.serverEvents(rest)
        #expect(closing.last?["event"] as? String == "stopping", "\(rest)")
        #expect(closing.last?["startedAt"] as? String == started["startedAt"] as? String)
        await curl.waitForExit()
        #expect(curl.terminationStatus == 0, "the stream ended, not cut (curl \(curl.terminationStatus))")
        let stateText = await onOwnThread { String(decoding: stateEvents.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
        #expect(!stateText.contains("event: server"), "\(stateText)")

        #expect(try await Self.exited(process))
        #expect(process.terminationStatus == 0)
        let server = receiver.requests.filter { $0.json["type"] as? String == "server" }
        #expect(server.map { $0.json["event"] as? String } == ["started", "stopping"], "\(server.map(\.body))")
        let openAPI = OpenAPIRecords()
        for request in server {
            #expect(request.headers.first(name: "X-Hlscache-Event") == "server")
            let signature = try #require(request.headers.first(name: "X-Hlscache-Signature"))
            #expect(HMACSHA256.isValid(String(signature.dropFirst(7)), for: request.body, key: Self.secret))
            openAPI.add(schema: "WebhookEvent", body: request.body)
        }
        for event in [started] + closing {
            openAPI.add(schema: "ServerEvent", body: String(decoding: try JSONSerialization.data(withJSONObject: event), as: UTF8.self))
        }
        let (status, output) = try await openAPI.validate()
        #expect(status == 0, "\(output)")
        await receiver.stop()
    }

    @Test func aReceiverThatNeverAnswersDoesNotHoldTheShutdown() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-server-events-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        // Accepts connections and reads requests, never answers: each delivery waits for its 10 s timeout, and with 20
        // attempts a stop that waited for the deliveries would outlast the test's 120 s bound (``CLI/exited(_:)``). The stop
        // waits the default webhooks.stopWait (5 s).
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        let hook = "http://127.0.0.1:\(silent.localAddress?.port ?? 0)/hook"
        let (process, _) = try await Self.startServe(cache: cache, hook: hook, attempts: 20, stopWait: "5s")
        defer { if process.isRunning { process.terminate() } }

        kill(process.processIdentifier, SIGTERM)
        #expect(try await Self.exited(process), "the shutdown does not wait for a receiver that never answers")
        #expect(process.terminationStatus == 0)
        // What was not delivered (`started`, `stopping`) waits in the outbox for the next start.
        let kept = try ItemStore(directory: cache.path).webhookOutbox()
        let events = kept.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.body.utf8))) as? [String: Any] }
        #expect(events.contains { $0["type"] as? String == "server" && $0["event"] as? String == "stopping" }, "\(kept.map(\.body))")
        try await silent.close()
    }
}
