import Foundation
import HLSAdmin
import HLSCrypto
import HLSDownloader
import HLSTestSupport
import Logging
import NIOPosix
import Testing

/// Webhook events that outlive a stop of `serve` (issue 27): kept in `items.sqlite` (`webhook_outbox`), delivered at the
/// next start in order with the same body, signature and delivery id; bounded, what falls off counted. Every body is
/// checked against docs/openapi.yaml (`WebhookEvent`).
@Suite("Webhooks across a restart")
struct WebhookOutboxTests {
    static let secret = "a-webhook-secret-of-some-length"

    @Test("Receiver down, serve stops, serve starts, receiver up: the events queued at the stop arrive in order, as they were signed")
    func eventsQueuedAtAStopArriveAfterTheNextStart() async throws {
        let receiver = WebhookReceiver(failures: 0)
        try await receiver.startBelowTheEphemeralRange()
        let port = receiver.port
        let url = receiver.url
        await receiver.stop()  // down: connections refused
        var configuration = WebhookConfiguration()
        configuration.urls = [url]
        configuration.secret = Self.secret
        // Never given up on: the deliveries are retried (really waiting a little) until the stop interrupts one.
        configuration.attempts = 1_000_000
        configuration.retryBaseDelay = .milliseconds(20)
        configuration.retryMaxDelay = .milliseconds(100)
        let root = try await AdminManyItemsTests.tsStream()
        let first = try await AdminHarness(root: root, webhooks: configuration)
        let directory = first.cacheDirectory
        defer { try? FileManager.default.removeItem(at: directory) }
        let created = try await first.request(
            .POST, first.api("/items"), json: #"{"url":"\#(first.originURL("/master.m3u8"))","seconds":2,"id":"kept"}"#)
        #expect(created.status == 201, "\(created.text)")
        _ = try await first.eventually("the item to settle") { try first.items.require("kept").state == .partiallyCached ? true : nil }
        #expect(try await first.request(.POST, first.api("/items/kept/lock")).status == 200)
        let notifier = try #require(first.webhooks)
        let waiting = try await first.eventually("the events to wait for the receiver") { () -> [String]? in
            let bodies = notifier.waitingBodies[0]
            return bodies.last.map { $0.contains(#""type":"lock""#) } == true ? bodies : nil
        }
        #expect(notifier.count(of: .delivered) == 0)
        await first.shutdown(keepingCache: true)

        // Kept at the stop, in order, as they were (the one being retried first).
        let kept = try ItemStore(directory: directory.path).webhookOutbox()
        #expect(Array(kept.map(\.body).prefix(waiting.count)) == waiting, "\(kept.map(\.body))")
        #expect(kept.allSatisfy { $0.receiver == url })

        let second = try await AdminHarness(root: root, cacheDirectory: directory, webhooks: configuration)
        defer { second.shutdownLater() }
        try await receiver.start(port: port)  // up, at the same URL
        let arrived = try await second.eventually("the kept events to arrive") { () -> [WebhookReceiver.Received]? in
            let accepted = receiver.requests.filter { $0.status == 204 }
            return accepted.count >= kept.count ? Array(accepted.prefix(kept.count)) : nil
        }
        #expect(arrived.map(\.body) == kept.map(\.body), "in order, the same bodies")
        let openAPI = OpenAPIRecords()
        for (request, entry) in zip(arrived, kept) {
            #expect(request.headers.first(name: "X-Hlscache-Delivery") == entry.delivery, "the same delivery id")
            #expect(request.headers.first(name: "X-Hlscache-Event") == entry.type)
            let signature = try #require(request.headers.first(name: "X-Hlscache-Signature"))
            #expect(signature == WebhookNotifier.signature(of: entry.body, secret: Self.secret), "the same signature")
            #expect(HMACSHA256.isValid(String(signature.dropFirst(7)), for: request.body, key: Self.secret))
            openAPI.add(schema: "WebhookEvent", body: request.body)
        }
        let states = arrived.filter { $0.json["type"] as? String == "state" }.compactMap { $0.json["state"] as? String }
        #expect(states == ["queued", "downloading", "partiallyCached"], "\(states)")
        #expect(arrived.last?.json["type"] as? String == "lock" && arrived.last?.json["locked"] as? Bool == true)
        #expect(try second.items.webhookOutbox().isEmpty, "taken from the outbox")

        // New events follow them, numbered after theirs.
        let lastKept =
            kept.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.body.utf8)) as? [String: Any])?["sequence"] as? Int }.max()
            ?? 0
        #expect(try await second.request(.POST, second.api("/items/kept/unlock")).status == 200)
        let unlocked = try await second.eventually("the unlock event") {
            receiver.requests.first { $0.status == 204 && $0.json["type"] as? String == "lock" && $0.json["locked"] as? Bool == false }
        }
        #expect((unlocked.json["sequence"] as? Int ?? 0) > lastKept, "the sequence goes on after the kept events")
        openAPI.add(schema: "WebhookEvent", body: unlocked.body)
        let (status, output) = try await openAPI.validate()
        #expect(status == 0, "\(output)")
        await second.shutdown()
        await receiver.stop()
    }

    @Test("The outbox is bounded: the oldest events past webhooks.queueSize per receiver are dropped and counted")
    func theOutboxIsBounded() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-outbox-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let items = try ItemStore(directory: directory.path)
        var configuration = WebhookConfiguration()
        configuration.urls = ["http://127.0.0.1:9/hook"]
        configuration.secret = Self.secret
        configuration.queueSize = 3
        configuration.attempts = 2
        // A delivery that fails waits (until the stop) before its next attempt: it is interrupted, never given up on.
        configuration.sleep = { _ in try await Task.sleep(for: .seconds(3600)) }
        let notifier = WebhookNotifier(
            configuration: configuration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "t"), outbox: items)
        for index in 0..<5 { notifier.enqueue(.state(id: "i\(index)", state: .queued, error: nil)) }
        #expect(notifier.count(of: .dropped) == 2, "five events into a queue of three")
        let task = Task { try? await notifier.run() }
        task.cancel()
        await task.value
        func ids(_ bodies: [String]) -> [String] {
            bodies.compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["id"] as? String }
        }
        #expect(ids(try items.webhookOutbox().map(\.body)) == ["i2", "i3", "i4"], "kept at the stop, oldest first")
        #expect(notifier.count(of: .dropped) == 2)
        // An event after the stop goes straight to the outbox.
        notifier.enqueue(.removed(id: "i5"))
        #expect(ids(try items.webhookOutbox().map(\.body)) == ["i3", "i4", "i5"], "still at most three: the oldest dropped")
        #expect(notifier.count(of: .dropped) == 3)

        // The next start, with a queue of two. Made but not running (a serve that fails to start): the outbox stays.
        configuration.queueSize = 2
        let next = WebhookNotifier(
            configuration: configuration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "t"), outbox: items)
        next.enqueue(.state(id: "i6", state: .queued, error: nil))
        #expect(try next.waitingBodies[0].count == 1 && items.webhookOutbox().count == 3, "nothing taken before it runs")
        // Running: the kept events go in front of the one announced since, the oldest past two dropped and counted.
        let running = Task { try? await next.run() }
        _ = try await Self.eventually("the kept events queued") { next.count(of: .dropped) == 2 ? true : nil }
        #expect(ids(next.waitingBodies[0]) == ["i5", "i6"], "\(next.waitingBodies)")
        #expect(try items.webhookOutbox().isEmpty, "taken")
        let sequences = next.waitingBodies[0].compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["sequence"] as? Int
        }
        #expect(sequences.count == 2 && sequences[1] > sequences[0], "the new event is numbered after the kept ones: \(sequences)")
        running.cancel()
        await running.value
        #expect(ids(try items.webhookOutbox().map(\.body)) == ["i5", "i6"], "kept again at this stop")
        // A receiver no longer configured: its events are dropped at the start, counted.
        try items.saveWebhookOutbox(
            [WebhookOutboxEntry(receiver: "http://127.0.0.1:9/gone", delivery: "d", type: "state", body: "{}")], limit: 10)
        let third = WebhookNotifier(
            configuration: configuration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "t"), outbox: items)
        let again = Task { try? await third.run() }
        _ = try await Self.eventually("the unknown receiver's event dropped") { third.count(of: .dropped) == 1 ? true : nil }
        #expect(ids(third.waitingBodies[0]) == ["i5", "i6"])
        again.cancel()
        await again.value
    }

    /// Polls `check` every 20 ms until it returns a value, for at most 300 s (a bound, not a measurement): the shared
    /// ``HLSTestSupport/eventually(_:timeout:interval:_:)``.
    static func eventually<T>(_ what: String, _ check: () throws -> T?) async throws -> T {
        try await HLSTestSupport.eventually(what) { try check() }
    }
}
