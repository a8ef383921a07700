import AsyncHTTPClient
import Foundation
import HLSCacheCore
import HLSCrypto
import HLSProxy
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// The settings of ``WebhookNotifier`` (`webhooks.*`, docs/configuration.md).
public struct WebhookConfiguration: Sendable {
    /// The receivers.
    public var urls: [String] = []
    /// The HMAC-SHA256 key of `X-Hlscache-Signature`.
    public var secret = ""
    /// Deliveries tried per event and receiver.
    public var attempts = 5
    /// The wait before the second delivery; doubled for each further one, up to ``retryMaxDelay``.
    public var retryBaseDelay: Duration = .seconds(1)
    public var retryMaxDelay: Duration = .seconds(300)
    /// Events waiting per receiver; past it the oldest waiting one is dropped.
    public var queueSize = 1024
    /// One delivery's whole time (connect, send, answer).
    public var timeout: Duration = .seconds(10)
    /// How the wait between two deliveries is waited (tests inject their own).
    public var sleep: @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    /// The time written into each event.
    public var clock: @Sendable () -> Date = { Date() }

    public init() {}
}

/// Webhooks (issue 27): every item state change (``AdminEvent/state``, ``AdminEvent/removed``) the ``EventHub``
/// announces is POSTed as JSON to each configured receiver, signed with HMAC-SHA256 under the configured secret
/// (`X-Hlscache-Signature: sha256=<hex>` over the exact body, which carries a timestamp and a sequence number).
///
/// Never in a download's way: ``enqueue(_:)`` appends to one bounded queue per receiver and returns; each
/// receiver's deliveries run in order in a task of their own, retried with back-off on anything but a 2xx; when a
/// queue is full the oldest waiting event is dropped and counted (`hlscache_webhook_dropped_total`). Events still
/// queued when the server stops are not delivered.
public final class WebhookNotifier: Service, Sendable {
    private struct Receiver: Sendable {
        let url: String
        let stream: AsyncStream<Delivery>
        let continuation: AsyncStream<Delivery>.Continuation
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
    private let sequence = NIOLockedValueBox<Int64>(0)
    private let counts = NIOLockedValueBox<[WebhookOutcome: Int]>([:])

    /// - Parameter onOutcome: told of each event delivered, given up on, or dropped (the server's metrics).
    public init(
        configuration: WebhookConfiguration, eventLoopGroup: any EventLoopGroup, logger: Logger,
        onOutcome: @escaping @Sendable (WebhookOutcome) -> Void = { _ in }
    ) {
        self.configuration = configuration
        self.receivers = configuration.urls.map { url in
            let (stream, continuation) = AsyncStream.makeStream(of: Delivery.self, bufferingPolicy: .bufferingNewest(max(1, configuration.queueSize)))
            return Receiver(url: url, stream: stream, continuation: continuation)
        }
        self.eventLoopGroup = eventLoopGroup
        self.logger = logger
        self.onOutcome = onOutcome
    }

    /// Feeds the notifier from `hub`: call once, before the hub announces anything.
    public func follow(_ hub: EventHub) {
        hub.observe { [weak self] event in self?.enqueue(event) }
    }

    /// Queues a state change or removal for every receiver; other events are not sent. Never waits.
    public func enqueue(_ event: AdminEvent) {
        guard !receivers.isEmpty else { return }
        switch event {
        case .state, .removed: break
        case .progress, .evicted, .played: return
        }
        let number = sequence.withLockedValue { value -> Int64 in
            value += 1
            return value
        }
        var object = event.object
        object["sequence"] = number
        object["timestamp"] = AdminJSON.iso(configuration.clock())
        let delivery = Delivery(id: UUID().uuidString.lowercased(), type: event.type, body: AdminJSON.string(object))
        for receiver in receivers {
            if case .dropped = receiver.continuation.yield(delivery) { count(.dropped) }
        }
    }

    /// How many events were delivered, given up on, or dropped (over every receiver) so far.
    public func count(of outcome: WebhookOutcome) -> Int {
        counts.withLockedValue { $0[outcome] ?? 0 }
    }

    /// The `X-Hlscache-Signature` value of `body` under `secret`.
    public static func signature(of body: String, secret: String) -> String {
        "sha256=" + HMACSHA256.hex(body, key: secret)
    }

    /// Delivers until the task is cancelled or the service group shuts down; then stops the HTTP client.
    public func run() async throws {
        // Made here, so a notifier that never runs (serve failing to start) leaves no client to shut down.
        let client = HTTPClient(
            eventLoopGroupProvider: .shared(eventLoopGroup), configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                for receiver in self.receivers {
                    group.addTask {
                        for await delivery in receiver.stream {
                            if Task.isCancelled { break }
                            await self.deliver(delivery, to: receiver.url, client: client)
                        }
                    }
                }
                // Cancellation ends the receivers' loops: finishing their streams wakes loops waiting for an event.
                await withTaskCancellationHandler {
                    await group.waitForAll()
                } onCancel: {
                    for receiver in self.receivers { receiver.continuation.finish() }
                }
            }
        }
        for receiver in receivers { receiver.continuation.finish() }
        try? await client.shutdown()
    }

    /// One event to one receiver: up to ``WebhookConfiguration/attempts`` POSTs until one gets a 2xx.
    func deliver(_ delivery: Delivery, to url: String, client: HTTPClient) async {
        var lastProblem = ""
        for attempt in 1...max(1, configuration.attempts) {
            if Task.isCancelled { return }
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
                    return
                }
                lastProblem = "HTTP \(response.status.code)"
            } catch {
                lastProblem = "\(error)"
            }
            guard attempt < configuration.attempts else { break }
            logger.debug("webhook \(url): \(lastProblem); attempt \(attempt + 1) after \(delay(after: attempt))")
            do { try await configuration.sleep(delay(after: attempt)) } catch { return }
        }
        count(.failed)
        logger.warning("webhook \(url): gave up on event \(delivery.id) after \(configuration.attempts) attempts: \(lastProblem)")
    }

    /// The wait after failed attempt `attempt` (1, 2, …): the base delay doubled each time, capped.
    func delay(after attempt: Int) -> Duration {
        min(configuration.retryBaseDelay * (1 << min(max(0, attempt - 1), 20)), configuration.retryMaxDelay)
    }

    private func count(_ outcome: WebhookOutcome) {
        counts.withLockedValue { $0[outcome, default: 0] += 1 }
        onOutcome(outcome)
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
