import AsyncHTTPClient
import Foundation
import HLSCacheCore
import HLSCrypto
import HLSDownloader
import HLSProxy
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// The settings of ``WebhookNotifier`` (`webhooks.*`, docs/configuration.md).
package struct WebhookConfiguration: Sendable {
    /// The receivers.
    package var urls: [String] = []
    /// The HMAC-SHA256 key of `X-Hlscache-Signature`.
    package var secret = ""
    /// Deliveries tried per event and receiver.
    package var attempts = 5
    /// The wait before the second delivery; doubled for each further one, up to ``retryMaxDelay``.
    package var retryBaseDelay: Duration = .seconds(1)
    package var retryMaxDelay: Duration = .seconds(300)
    /// Events waiting per receiver; past it the oldest waiting one is dropped.
    package var queueSize = 1024
    /// One delivery's whole time (connect, send, answer).
    package var timeout: Duration = .seconds(10)
    /// At a graceful stop, how long the deliveries may go on to empty the queues (the server's `stopping` is in
    /// them); what is still queued after it (a receiver down or slow) goes to the outbox. A dead receiver never
    /// holds a shutdown longer.
    package var stopWait: Duration = .seconds(5)
    /// How the wait between two deliveries is waited (tests inject their own).
    package var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    /// The time written into each event.
    package var clock: @Sendable () -> Date = { Date() }

    package init() {}
}

/// Webhooks (issue 27): every item state change (``AdminEvent/state``, ``AdminEvent/removed``, ``AdminEvent/locked``) the ``EventHub``
/// announces is POSTed as JSON to each configured receiver, signed with HMAC-SHA256 under the configured secret
/// (`X-Hlscache-Signature: sha256=<hex>` over the exact body, which carries a timestamp and a sequence number).
///
/// Never in a download's way: ``enqueue(_:)`` appends to one bounded queue per receiver and returns; each
/// receiver's deliveries run in order in a task of their own, retried with back-off on anything but a 2xx; when a
/// queue is full the oldest waiting event is dropped and counted (`hlscache_webhook_dropped_total`).
///
/// Events still queued when the notifier stops (the one being delivered included) are written to the outbox
/// (`webhook_outbox` in `items.sqlite`, at most ``WebhookConfiguration/queueSize`` per receiver, the oldest dropped
/// and counted) and delivered first at the next start, in order, with the same body, signature and delivery id.
package final class WebhookNotifier: Service, Sendable {
    private struct Receiver: Sendable {
        let url: String
        let queue: WebhookQueue
    }

    struct Delivery: Sendable {
        let id: String
        let type: String
        let body: String
    }

    let configuration: WebhookConfiguration
    private let receivers: [Receiver]
    private let eventLoopGroup: any EventLoopGroup
    private let logger: Logger
    private let onOutcome: @Sendable (WebhookOutcome) -> Void
    /// The last sequence number given and the outcomes counted so far, under one lock.
    private struct State {
        var sequence: Int64 = 0
        var counts: [WebhookOutcome: Int] = [:]
    }
    private let state = NIOLockedValueBox(State())
    private let outbox: ItemStore?

    /// - Parameter outbox: where events left undelivered at a stop wait for the next start (`items.sqlite`); those
    ///   waiting there are queued first when ``run()`` starts (not before: a server that fails to start loses
    ///   nothing). `nil`: they are lost.
    /// - Parameter onOutcome: told of each event delivered, given up on, or dropped (the server's metrics).
    package init(
        configuration: WebhookConfiguration, eventLoopGroup: any EventLoopGroup, logger: Logger, outbox: ItemStore? = nil,
        onOutcome: @escaping @Sendable (WebhookOutcome) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.receivers = configuration.urls.map { Receiver(url: $0, queue: WebhookQueue(capacity: configuration.queueSize)) }
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.onOutcome = onOutcome
        self.outbox = outbox
        // New events are numbered after the kept ones (read here, taken when the notifier runs).
        if let kept = try? outbox?.webhookOutbox() {
            let last = kept.map(Self.sequence(of:)).max() ?? 0
            state.withLockedValue { $0.sequence = max($0.sequence, last) }
        }
    }

    private static func sequence(of entry: WebhookOutboxEntry) -> Int64 {
        ((try? JSONSerialization.jsonObject(with: Data(entry.body.utf8))) as? [String: Any])?["sequence"] as? Int64 ?? 0
    }

    /// Puts the events the last run left in the outbox in front of every queue (before the events announced since
    /// this notifier was made), removing them from the outbox; a receiver no longer configured loses its events.
    private func restoreOutbox() {
        guard let outbox else { return }
        let entries: [WebhookOutboxEntry]
        do {
            entries = try outbox.takeWebhookOutbox()
        } catch {
            logger.warning("webhooks: cannot read the events kept at the last stop: \(error)")
            return
        }
        guard !entries.isEmpty else { return }
        let last = entries.map(Self.sequence(of:)).max() ?? 0
        state.withLockedValue { $0.sequence = max($0.sequence, last) }
        var queued = 0
        for receiver in receivers {
            let mine = entries.filter { $0.receiver == receiver.url }.map { Delivery(id: $0.delivery, type: $0.type, body: $0.body) }
            guard !mine.isEmpty else { continue }
            for _ in 0..<receiver.queue.prepend(mine) { count(.dropped) }
            queued += mine.count
        }
        // Receivers no longer configured.
        for _ in 0..<(entries.count - queued) { count(.dropped) }
        logger.notice("webhooks: \(queued) event(s) kept at the last stop are delivered first")
    }

    /// The bodies of the events waiting for each receiver (the one being delivered first), in `webhooks.urls` order.
    package var waitingBodies: [[String]] { receivers.map(\.queue.bodies) }

    /// Feeds the notifier from `hub`: call once, before the hub announces anything.
    package func follow(_ hub: EventHub) {
        hub.observe { [weak self] event in self?.enqueue(event) }
    }

    /// Queues a state change, removal, lock or unlock, or the server's `started`/`stopping`, for every receiver; other
    /// events are not sent. Never waits.
    package func enqueue(_ event: AdminEvent) {
        guard !receivers.isEmpty else { return }
        switch event {
        case .state, .removed, .locked, .server: break
        case .progress, .evicted, .played, .policy: return
        }
        let number = state.withLockedValue { state -> Int64 in
            state.sequence += 1
            return state.sequence
        }
        var object = event.object
        object["sequence"] = number
        object["timestamp"] = AdminJSON.iso(configuration.clock())
        let delivery = Delivery(id: UUID().uuidString.lowercased(), type: event.type, body: AdminJSON.string(object))
        var late: [WebhookOutboxEntry] = []
        for receiver in receivers {
            switch receiver.queue.push(delivery) {
            case .queued: break
            case .droppedOldest: count(.dropped)
            case .closed:
                late.append(WebhookOutboxEntry(receiver: receiver.url, delivery: delivery.id, type: delivery.type, body: delivery.body))
            }
        }
        // After the stop (the last state changes of a shutting-down server): straight to the outbox.
        if !late.isEmpty { keep(late) }
    }

    /// Writes undelivered events to the outbox for the next start (bounded per receiver; what falls off is counted).
    private func keep(_ entries: [WebhookOutboxEntry]) {
        guard !entries.isEmpty else { return }
        guard let outbox else {
            for _ in entries { count(.dropped) }
            logger.warning("webhooks: \(entries.count) event(s) not delivered before the stop are lost")
            return
        }
        do {
            let dropped = try outbox.saveWebhookOutbox(entries, limit: configuration.queueSize)
            for _ in 0..<dropped { count(.dropped) }
            logger.notice("webhooks: \(entries.count) event(s) not delivered yet are kept for the next start")
        } catch {
            for _ in entries { count(.dropped) }
            logger.warning("webhooks: cannot keep \(entries.count) undelivered event(s) for the next start: \(error)")
        }
    }

    /// How many events were delivered, given up on, or dropped (over every receiver) so far.
    package func count(of outcome: WebhookOutcome) -> Int {
        state.withLockedValue { $0.counts[outcome] ?? 0 }
    }

    /// The `X-Hlscache-Signature` value of `body` under `secret`.
    package static func signature(of body: String, secret: String) -> String {
        "sha256=" + HMACSHA256.hex(body, key: secret)
    }

    /// Delivers until the task is cancelled, or the service group shuts down and the queues are empty or
    /// ``WebhookConfiguration/stopWait`` passed; then keeps what is left in the outbox and stops the HTTP client.
    package func run() async throws {
        // Made here, so a notifier that never runs (serve failing to start) leaves no client to shut down.
        let client = HTTPClient(
            eventLoopGroupProvider: .shared(eventLoopGroup), configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))
        restoreOutbox()
        await withTaskGroup(of: Void.self) { stop in
            stop.addTask { await self.deliverAll(client: client) }
            // At a graceful stop the queues get up to `stopWait` to empty (`stopping` goes out), then the deliveries
            // are cancelled; cancelled outright, they stop at once.
            stop.addTask {
                guard (try? await gracefulShutdown()) != nil else { return }
                let deadline = ContinuousClock.now + self.configuration.stopWait
                while self.receivers.contains(where: { $0.queue.count > 0 }) && ContinuousClock.now < deadline {
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            await stop.next()
            stop.cancelAll()
        }
        var left: [WebhookOutboxEntry] = []
        for receiver in receivers {
            left += receiver.queue.drain().map { WebhookOutboxEntry(receiver: receiver.url, delivery: $0.id, type: $0.type, body: $0.body) }
        }
        keep(left)
        try? await client.shutdown()
    }

    /// Delivers each receiver's queue in order until the task is cancelled.
    private func deliverAll(client: HTTPClient) async {
        await withTaskGroup(of: Void.self) { group in
            for receiver in self.receivers {
                group.addTask {
                    while let delivery = await receiver.queue.next() {
                        // Interrupted by the stop: it stays in flight, for the outbox.
                        guard await self.deliver(delivery, to: receiver.url, client: client) else { break }
                        receiver.queue.done()
                    }
                }
            }
            // Cancellation ends the receivers' loops: finishing their queues wakes loops waiting for an event.
            await withTaskCancellationHandler {
                await group.waitForAll()
            } onCancel: {
                for receiver in self.receivers { receiver.queue.finish() }
            }
        }
    }

    /// One event to one receiver: up to ``WebhookConfiguration/attempts`` POSTs until one gets a 2xx.
    /// - Returns: `false` when the stop interrupted it (neither delivered nor given up on).
    func deliver(_ delivery: Delivery, to url: String, client: HTTPClient) async -> Bool {
        var lastProblem = ""
        for attempt in 1...max(1, configuration.attempts) {
            if Task.isCancelled { return false }
            do {
                var request = HTTPClientRequest(url: url)
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.headers.add(name: "User-Agent", value: "hlscache/\(HLSCacheVersion.current)")
                request.headers.add(name: "X-Hlscache-Event", value: delivery.type)
                request.headers.add(name: "X-Hlscache-Delivery", value: delivery.id)
                request.headers.add(name: "X-Hlscache-Signature", value: Self.signature(of: delivery.body, secret: configuration.secret))
                request.body = .bytes(ByteBuffer(string: delivery.body))
                let response = try await client.execute(request, timeout: Self.timeAmount(configuration.timeout))
                // The answer's body is read and dropped (a bounded amount; the connection is reused).
                var read = 0
                for try await chunk in response.body {
                    read += chunk.readableBytes
                    if read > 64 * 1024 { break }
                }
                if (200..<300).contains(response.status.code) {
                    count(.delivered)
                    return true
                }
                lastProblem = "HTTP \(response.status.code)"
            } catch {
                if Task.isCancelled { return false }
                lastProblem = "\(error)"
            }
            guard attempt < configuration.attempts else { break }
            logger.debug("webhook \(url): \(lastProblem); attempt \(attempt + 1) after \(delay(after: attempt))")
            do { try await configuration.sleep(delay(after: attempt)) } catch { return false }
            if Task.isCancelled { return false }
        }
        count(.failed)
        logger.warning("webhook \(url): gave up on event \(delivery.id) after \(configuration.attempts) attempts: \(lastProblem)")
        return true
    }

    /// The wait after failed attempt `attempt` (1, 2, …): the base delay doubled each time, capped.
    func delay(after attempt: Int) -> Duration {
        min(configuration.retryBaseDelay * (1 << min(max(0, attempt - 1), 20)), configuration.retryMaxDelay)
    }

    private func count(_ outcome: WebhookOutcome) {
        state.withLockedValue { $0.counts[outcome, default: 0] += 1 }
        onOutcome(outcome)
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
