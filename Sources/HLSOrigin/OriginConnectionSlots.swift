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

    private enum Waiter {
        /// Numbered, not queued yet (between the check and the continuation).
        case pending
        case waiting(CheckedContinuation<Void, any Error>, Scheduled<Void>?)
        /// Cancelled before it was queued.
        case cancelled
    }

    private struct Host {
        var busy = 0
        /// Waiter numbers in arrival order (entries already gone from `waiters` are skipped).
        var line: [UInt64] = []
    }

    private struct State {
        var hosts: [String: Host] = [:]
        var waiters: [UInt64: (host: String, waiter: Waiter)] = [:]
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

    /// Takes a slot for `host`, waiting in line while all are taken. Call ``release(_:)`` once for each return.
    /// - Throws: ``OriginError/busy`` after ``waitLimit``; `CancellationError` when the task is cancelled meanwhile.
    func acquire(_ host: String, timerOn eventLoop: any EventLoop) async throws {
        let number = state.withLock { state -> UInt64? in
            if state.hosts[host, default: Host()].busy < limit {
                state.hosts[host, default: Host()].busy += 1
                return nil
            }
            state.next += 1
            state.waiters[state.next] = (host, .pending)
            state.statistics.waits += 1
            state.statistics.waiting += 1
            return state.next
        }
        guard let number else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let timer = eventLoop.scheduleTask(in: waitLimit) { [weak self] () -> Void in self?.giveUp(number) }
                let queued = state.withLock { state -> Bool in
                    guard case .pending = state.waiters[number]?.waiter else {
                        state.waiters[number] = nil
                        state.statistics.waiting -= 1
                        return false
                    }
                    // A slot may have come free between the first look and now.
                    if state.hosts[host, default: Host()].busy < limit {
                        state.hosts[host, default: Host()].busy += 1
                        state.waiters[number] = nil
                        state.statistics.waiting -= 1
                        continuation.resume()
                        return true
                    }
                    state.waiters[number] = (host, .waiting(continuation, timer))
                    state.hosts[host, default: Host()].line.append(number)
                    return true
                }
                if !queued {
                    timer.cancel()
                    continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let entry = state.waiters[number] else { return nil }
                switch entry.waiter {
                case .pending:
                    state.waiters[number] = (entry.host, .cancelled)
                    return nil
                case .waiting(let continuation, let timer):
                    timer?.cancel()
                    state.waiters[number] = nil
                    state.statistics.waiting -= 1
                    return continuation
                case .cancelled:
                    return nil
                }
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Gives a slot of `host` back: to the first request waiting for one, else free.
    func release(_ host: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard var entry = state.hosts[host] else { return nil }
            while !entry.line.isEmpty {
                let number = entry.line.removeFirst()
                guard case .waiting(let continuation, let timer)? = state.waiters.removeValue(forKey: number)?.waiter else { continue }
                timer?.cancel()
                state.statistics.waiting -= 1
                state.hosts[host] = entry
                // The slot passes to the waiter as it is: `busy` does not change.
                return continuation
            }
            entry.busy -= 1
            state.hosts[host] = entry.busy == 0 ? nil : entry
            return nil
        }
        next?.resume()
    }

    private func giveUp(_ number: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard case .waiting(let continuation, _)? = state.waiters[number]?.waiter else { return nil }
            state.waiters[number] = nil
            state.statistics.waiting -= 1
            state.statistics.timeouts += 1
            return continuation
        }
        continuation?.resume(
            throwing: OriginError.busy.with(
                "every one of the \(limit) connections to this origin host stayed busy for \(Self.describe(waitLimit)) (origin.maxConnectionsPerHost)"
            ))
    }

    static func describe(_ amount: TimeAmount) -> String {
        let milliseconds = amount.nanoseconds / 1_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}
