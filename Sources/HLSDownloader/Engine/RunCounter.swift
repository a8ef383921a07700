import Foundation
import NIOConcurrencyHelpers

/// Bytes fetched from origins during one run, for the rate shown on the progress line.
final class RunCounter: Sendable {
    private struct State {
        var bytes: Int64 = 0
        let start = ContinuousClock.now
        var itemRecorded: Int64 = 0
        /// Transfers at a time, and how often they were narrowed (``pushedBack(generation:)``).
        var transfers: Int
        var generation = 0
        /// The moving average of this run's speed (`bytesPerSecond` of the item and its progress events).
        var speed = TransferRate()
    }
    private let state: NIOLockedValueBox<State>
    /// What paces this run's transfers: the item's cap within the process's, or the process's.
    let limiter: RateLimiter?
    /// Counts bytes towards the day's volume (``Downloader/addVolume(_:)``).
    private let volume: (@Sendable (Int) -> Void)?

    init(limiter: RateLimiter? = nil, volume: (@Sendable (Int) -> Void)? = nil, transfers: Int = 1) {
        self.limiter = limiter
        self.volume = volume
        var state = State(transfers: max(1, transfers))
        state.speed.add(total: 0, at: .now)
        self.state = NIOLockedValueBox(state)
    }

    /// Transfers this run runs at once: `downloads.resourcesPerItem`, halved each time the origin pushed back.
    var transfers: Int { state.withLockedValue { $0.transfers } }

    /// Taken when a transfer starts; a push-back from it narrows the run only if no other narrowed it since.
    var generation: Int { state.withLockedValue { $0.generation } }

    /// The origin answered 429 or 503 to a transfer started at `generation`: the run goes on with half as many
    /// transfers at a time (at least one), for the rest of the run — once per burst, not once per transfer that was
    /// already under way when the origin began to refuse. Returns the new number if it narrowed.
    func pushedBack(generation: Int) -> Int? {
        state.withLockedValue { width -> Int? in
            guard width.generation == generation, width.transfers > 1 else { return nil }
            width.transfers = max(1, width.transfers / 2)
            width.generation += 1
            return width.transfers
        }
    }

    func add(_ bytes: Int) {
        let now = ContinuousClock.now
        state.withLockedValue { state in
            state.bytes += Int64(bytes)
            state.speed.add(total: state.bytes, at: now)
        }
        volume?(bytes)
    }

    /// Bytes fetched in this run.
    var total: Int64 { state.withLockedValue { $0.bytes } }

    /// The bytes not yet added to the item's daily count (`item_volume`), now counted as added.
    func takeUnrecorded() -> Int64 {
        state.withLockedValue { state in
            defer { state.itemRecorded = state.bytes }
            return state.bytes - state.itemRecorded
        }
    }

    /// Gives back bytes ``takeUnrecorded()`` took that could not be written.
    func giveBack(_ bytes: Int64) {
        state.withLockedValue { $0.itemRecorded -= bytes }
    }

    /// Bytes per second over the last ``TransferRate/window``; `nil` in the run's first second.
    var movingRate: Double? { state.withLockedValue { $0.speed.perSecond(at: .now) } }

    /// Bytes per second since the run started.
    var rate: Double {
        state.withLockedValue { state in
            let (seconds, attoseconds) = (ContinuousClock.now - state.start).components
            let elapsed = Double(seconds) + Double(attoseconds) / 1e18
            return elapsed > 0.05 ? Double(state.bytes) / elapsed : 0
        }
    }
}
