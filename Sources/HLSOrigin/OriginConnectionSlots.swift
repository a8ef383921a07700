import NIOCore
import Synchronization

/// Requests in flight per origin host, at most ``limit``: the origin client's own queue in front of
/// AsyncHTTPClient's connection pool, whose pool size it matches.
///
/// AsyncHTTPClient bounds the wait for a pooled connection by its connect timeout, so with every connection to a
/// host busy (slow transfers, players reading ahead) a request failed as a connect timeout. Here a request that
/// finds every slot of its host taken waits in line, first come first served, for up to ``waitLimit`` of its own,
/// and then fails with ``OriginError/busy``; what waited is counted (``statistics``).
final class OriginConnectionSlots: Sendable {
    /// Counts since the client started, read when `/metrics` is scraped.
    struct Statistics: Sendable, Equatable {
        /// Requests that found every slot of their host taken and had to wait.
        var waits = 0
        /// Of those, the ones that gave up after ``OriginConnectionSlots/waitLimit``.
        var timeouts = 0
        /// Requests waiting now.
        var waiting = 0
    }

    /// A request waiting for a slot: completed with the slot, or failed (wait limit, cancelled).
    private struct Waiter {
        var host: String
        var promise: EventLoopPromise<Void>
        var timer: Scheduled<Void>?
    }

    private struct Host {
        var busy = 0
        /// Waiter numbers in arrival order (entries already gone from `waiters` are skipped).
        var line: [UInt64] = []
    }

    private struct State {
        var hosts: [String: Host] = [:]
        var waiters: [UInt64: Waiter] = [:]
        var next: UInt64 = 0
        var statistics = Statistics()
    }

    /// Requests in flight per host at once.
    let limit: Int
    /// The longest a request waits for a slot.
    let waitLimit: TimeAmount
    private let state = Mutex(State())

    init(limit: Int, waitLimit: TimeAmount) {
        self.limit = max(1, limit)
        self.waitLimit = waitLimit
    }

    var statistics: Statistics { state.withLock { $0.statistics } }

    /// A request for a slot: ``future`` completes once the slot is the caller's (call ``release(_:)`` once then), or
    /// fails with ``OriginError/busy`` after ``waitLimit`` or with `CancellationError` after ``cancel()``.
    struct Request: Sendable {
        let future: EventLoopFuture<Void>
        fileprivate let number: UInt64?
        fileprivate let slots: OriginConnectionSlots

        /// Leaves the line if still in it (the future fails with `CancellationError`); a no-op once the slot was
        /// given or the wait failed.
        func cancel() {
            guard let number else { return }
            slots.leave(number, with: CancellationError())
        }
    }

    /// Takes a slot for `host` at once if one is free, else queues for one (first come, first served), the wait
    /// timed on `eventLoop`, whose futures the request's is.
    func acquire(_ host: String, on eventLoop: any EventLoop) -> Request {
        let promise = eventLoop.makePromise(of: Void.self)
        let limit = self.limit
        let waitLimit = self.waitLimit
        let number = state.withLock { state -> UInt64? in
            if state.hosts[host, default: Host()].busy < limit {
                state.hosts[host, default: Host()].busy += 1
                return nil
            }
            state.next += 1
            state.waiters[state.next] = Waiter(host: host, promise: promise)
            state.hosts[host, default: Host()].line.append(state.next)
            state.statistics.waits += 1
            state.statistics.waiting += 1
            return state.next
        }
        guard let number else {
            promise.succeed()
            return Request(future: promise.futureResult, number: nil, slots: self)
        }
        let timer = eventLoop.scheduleTask(in: waitLimit) { [weak self] () -> Void in
            self?.leave(
                number,
                with: OriginError.busy.with(
                    "every one of the \(limit) connections to this origin host stayed busy for \(Self.describe(waitLimit)) (origin.maxConnectionsPerHost)"
                ), timedOut: true)
        }
        // The slot may have come, or the wait ended, between the queueing and the timer.
        let waiting = state.withLock { state -> Bool in
            guard state.waiters[number] != nil else { return false }
            state.waiters[number]?.timer = timer
            return true
        }
        if !waiting { timer.cancel() }
        return Request(future: promise.futureResult, number: number, slots: self)
    }

    /// Gives a slot of `host` back: to the first request waiting for one, else free.
    func release(_ host: String) {
        let next = state.withLock { state -> Waiter? in
            guard var entry = state.hosts[host] else { return nil }
            while !entry.line.isEmpty {
                let number = entry.line.removeFirst()
                guard let waiter = state.waiters.removeValue(forKey: number) else { continue }
                state.statistics.waiting -= 1
                state.hosts[host] = entry
                // The slot passes to the waiter as it is: `busy` does not change.
                return waiter
            }
            entry.busy -= 1
            state.hosts[host] = entry.busy == 0 ? nil : entry
            return nil
        }
        guard let next else { return }
        next.timer?.cancel()
        next.promise.succeed()
    }

    /// Takes waiter `number` out of the line, failing its request with `error` (nothing if it is gone already).
    private func leave(_ number: UInt64, with error: any Error, timedOut: Bool = false) {
        let waiter = state.withLock { state -> Waiter? in
            guard let waiter = state.waiters.removeValue(forKey: number) else { return nil }
            state.statistics.waiting -= 1
            if timedOut { state.statistics.timeouts += 1 }
            return waiter
        }
        guard let waiter else { return }
        waiter.timer?.cancel()
        waiter.promise.fail(error)
    }

    static func describe(_ amount: TimeAmount) -> String {
        let milliseconds = amount.nanoseconds / 1_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
