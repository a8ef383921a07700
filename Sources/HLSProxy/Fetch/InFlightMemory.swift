import NIOConcurrencyHelpers
import NIOCore

/// The body bytes every in-flight origin download holds in memory together (`limits.inFlightMemory`), shown as
/// `hlscache_inflight_bytes`. Past the budget, a download's next origin read waits until another download lets go
/// of bytes (its cache file took them, or its clients did); each download's own share is bounded by its window.
///
/// After a burst the heap keeps the pages: glibc does not give back the free middle of its arenas, so a burst of
/// misses read slowly (downloads held whole while their file writes catch up) left the process at the burst's size
/// for good — 300 MB after 1,900 misses of 2 MiB at 8 connections. Once the bytes held fall to a quarter of a peak of
/// at least ``drainedAfter``, `onDrained` runs (``MemoryTrim/giveBackFreedMemory()`` off the event loops, in serve),
/// once per such burst.
final class InFlightMemory: Sendable {
    let budget: Int64
    /// A burst at least this large is followed by `onDrained` once it has drained.
    static let drainedAfter: Int64 = 32 << 20
    private let onDrained: (@Sendable () -> Void)?

    private struct State {
        var used: Int64 = 0
        /// The most ever held at once (a high-water mark, like `VmHWM`: no spike between two looks is missed).
        var peak: Int64 = 0
        /// The most held since `onDrained` last ran.
        var burst: Int64 = 0
        var nextID = 0
        var waiters: [Int: @Sendable () -> Void] = [:]
    }

    private let state = NIOLockedValueBox(State())

    init(budget: Int64, onDrained: (@Sendable () -> Void)? = nil) {
        self.budget = budget
        self.onDrained = onDrained
    }

    /// Bytes held now.
    var used: Int64 { state.withLockedValue { $0.used } }

    /// The most bytes held at once since the start.
    var peak: Int64 { state.withLockedValue { $0.peak } }

    /// Whether the budget is used up.
    var isExhausted: Bool { state.withLockedValue { $0.used > budget } }

    /// Records bytes let go (`bytes` > 0) or taken (`bytes` < 0); wakes the waiters once there is room.
    func release(_ bytes: Int64) {
        guard bytes != 0 else { return }
        let (woken, drained) = state.withLockedValue { state -> ([@Sendable () -> Void], Bool) in
            state.used -= bytes
            state.peak = max(state.peak, state.used)
            state.burst = max(state.burst, state.used)
            let drained = state.burst >= Self.drainedAfter && state.used <= state.burst / 4
            if drained { state.burst = state.used }
            guard state.used <= budget, !state.waiters.isEmpty else { return ([], drained) }
            defer { state.waiters.removeAll() }
            return (Array(state.waiters.values), drained)
        }
        for wake in woken { wake() }
        if drained { onDrained?() }
    }

    /// Calls `wake` once the budget has room (at once when it has now). Returns an id for ``cancel(_:)``.
    @discardableResult
    func whenAvailable(_ wake: @escaping @Sendable () -> Void) -> Int? {
        let id = state.withLockedValue { state -> Int? in
            guard state.used > budget else { return nil }
            state.nextID += 1
            state.waiters[state.nextID] = wake
            return state.nextID
        }
        if id == nil { wake() }
        return id
    }

    /// Forgets a waiter that no longer waits.
    func cancel(_ id: Int) {
        _ = state.withLockedValue { $0.waiters.removeValue(forKey: id) }
    }
}
