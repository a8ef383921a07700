import HLSCacheStore
import NIOConcurrencyHelpers

/// The slices being fetched from the origin now, by slice key: a request that needs a slice another request's run is
/// fetching follows that run instead of asking the origin again (docs/design.md §6: concurrent misses share one origin
/// request): it sends the slice from the run's temp file as it is written (``SliceFlight``), at the pace of the
/// request fetching it, as nginx's `slice` with `proxy_cache_lock` does with its cache lock, without waiting for the
/// slice's commit.
final class SliceFlights: Sendable {
    private let flights = NIOLockedValueBox<[String: SliceFlight]>([:])

    /// Claims slice `key` for a run of the caller's; false when another run has it.
    func claim(_ key: String) -> Bool {
        flights.withLockedValue { flights in
            guard flights[key] == nil else { return false }
            flights[key] = SliceFlight()
            return true
        }
    }

    /// The run fetching slice `key` now, if any.
    func flight(_ key: String) -> SliceFlight? {
        flights.withLockedValue { $0[key] }
    }

    /// The run that claimed slice `key` stored it, or gave it up: its followers go on.
    func release(_ key: String, stored: Bool) {
        flights.withLockedValue { $0.removeValue(forKey: key) }?.finish(stored: stored)
    }

    /// Requests waiting for a slice another one is fetching to progress (tests, diagnostics).
    var waiting: Int { flights.withLockedValue { $0.values.reduce(0) { $0 + $1.waiting } } }
    /// Slices being fetched.
    var inFlight: Int { flights.withLockedValue { $0.count } }
}

/// One slice being fetched by a run (``SliceRun``), as the requests following it see it: the version the origin
/// announced, the slice's temp file (readable after the rename and after an abort) and how much of it is written,
/// and, at the end, whether it was stored. Thread-safe: the run reports from its event loop and the thread pool.
final class SliceFlight: Sendable {
    struct Progress: Sendable {
        /// The version the run's answer is (once its head was accepted).
        var set: SliceSet?
        /// The slice's temp file, once its writer exists.
        var file: GrowingFile?
        /// Bytes of the slice written to `file`.
        var written: Int64 = 0
        /// Nil while the run goes on; then whether it stored the slice.
        var outcome: Bool?
        /// Counts changes, so a follower registers for the next one only if it saw the last (``whenChanged(after:_:)``).
        var changes = 0
    }

    private struct State {
        var progress = Progress()
        var listeners: [@Sendable () -> Void] = []
    }

    private let state = NIOLockedValueBox(State())

    var progress: Progress { state.withLockedValue { $0.progress } }

    /// Calls `listener` once, at the next change after the `changes`-th. False, without calling it, when that change
    /// came already or the flight is over: look at ``progress`` again.
    func whenChanged(after changes: Int, _ listener: @escaping @Sendable () -> Void) -> Bool {
        state.withLockedValue { state in
            guard state.progress.changes == changes, state.progress.outcome == nil else { return false }
            state.listeners.append(listener)
            return true
        }
    }

    /// Followers waiting for a change.
    var waiting: Int { state.withLockedValue { $0.listeners.count } }

    /// The run's answer is version `set`, and it stores it.
    func accepted(_ set: SliceSet) { change { $0.set = set } }
    /// The slice's writer exists; `file` reads it.
    func began(_ file: GrowingFile) { change { $0.file = file } }
    /// `total` bytes of the slice are written.
    func wrote(_ total: Int64) { change { $0.written = total } }
    /// The run is over for this slice: it stored it, or not.
    fileprivate func finish(stored: Bool) { change { $0.outcome = stored } }

    private func change(_ update: (inout Progress) -> Void) {
        let listeners = state.withLockedValue { state -> [@Sendable () -> Void] in
            update(&state.progress)
            state.progress.changes += 1
            defer { state.listeners = [] }
            return state.listeners
        }
        for listener in listeners { listener() }
    }
}
