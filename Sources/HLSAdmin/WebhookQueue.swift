import NIOConcurrencyHelpers

/// The events waiting for one webhook receiver: bounded (past its capacity the oldest waiting one is dropped), the
/// one being delivered kept until it is done, and everything left taken out at the end (``drain()``) for the outbox.
final class WebhookQueue: Sendable {
    enum Push: Equatable {
        case queued
        /// Queued, and the oldest waiting event dropped to make room.
        case droppedOldest
        /// The queue was drained (the notifier stopped): not queued.
        case closed
    }

    private struct State {
        var waiting: [WebhookNotifier.Delivery] = []
        var inFlight: WebhookNotifier.Delivery?
        var waiter: CheckedContinuation<WebhookNotifier.Delivery?, Never>?
        var finished = false
        var drained = false
    }

    private let state = NIOLockedValueBox(State())
    let capacity: Int

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Events waiting or being delivered.
    var count: Int { state.withLockedValue { $0.waiting.count + ($0.inFlight == nil ? 0 : 1) } }

    /// Their bodies, the one being delivered first.
    var bodies: [String] { state.withLockedValue { (($0.inFlight.map { [$0] } ?? []) + $0.waiting).map(\.body) } }

    /// Queues `delivery`; never waits.
    func push(_ delivery: WebhookNotifier.Delivery) -> Push {
        let (result, waiter) = state.withLockedValue { state -> (Push, CheckedContinuation<WebhookNotifier.Delivery?, Never>?) in
            if state.drained { return (.closed, nil) }
            if let waiter = state.waiter {
                state.waiter = nil
                state.inFlight = delivery
                return (.queued, waiter)
            }
            state.waiting.append(delivery)
            if state.waiting.count > capacity {
                state.waiting.removeFirst()
                return (.droppedOldest, nil)
            }
            return (.queued, nil)
        }
        waiter?.resume(returning: delivery)
        return result
    }

    /// Puts `deliveries` (older events, in order) in front of those waiting; past the capacity the oldest are dropped.
    /// - Returns: how many were dropped.
    func prepend(_ deliveries: [WebhookNotifier.Delivery]) -> Int {
        let (dropped, handOff) = state.withLockedValue {
            state -> (Int, (CheckedContinuation<WebhookNotifier.Delivery?, Never>, WebhookNotifier.Delivery)?) in
            guard !state.drained else { return (deliveries.count, nil) }
            state.waiting = deliveries + state.waiting
            let dropped = max(0, state.waiting.count - capacity)
            state.waiting.removeFirst(dropped)
            guard let waiter = state.waiter, !state.waiting.isEmpty else { return (dropped, nil) }
            state.waiter = nil
            let first = state.waiting.removeFirst()
            state.inFlight = first
            return (dropped, (waiter, first))
        }
        if let (waiter, first) = handOff { waiter.resume(returning: first) }
        return dropped
    }

    /// The next event to deliver (it stays in flight until ``done()``), or `nil` once the queue is finished.
    func next() async -> WebhookNotifier.Delivery? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<WebhookNotifier.Delivery?, Never>) in
                let answer = state.withLockedValue { state -> WebhookNotifier.Delivery?? in
                    if state.finished { return .some(nil) }
                    if !state.waiting.isEmpty {
                        let delivery = state.waiting.removeFirst()
                        state.inFlight = delivery
                        return .some(delivery)
                    }
                    state.waiter = continuation
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            finish()
        }
    }

    /// The event in flight is done with (delivered, or given up on).
    func done() {
        state.withLockedValue { $0.inFlight = nil }
    }

    /// Wakes a delivery loop waiting for an event, which then ends; events still waiting stay for ``drain()``.
    func finish() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<WebhookNotifier.Delivery?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Everything not delivered — the event in flight first, then those waiting — taken out; later pushes are refused.
    func drain() -> [WebhookNotifier.Delivery] {
        state.withLockedValue { state in
            state.drained = true
            state.finished = true
            defer {
                state.waiting = []
                state.inFlight = nil
            }
            return (state.inFlight.map { [$0] } ?? []) + state.waiting
        }
    }
}
