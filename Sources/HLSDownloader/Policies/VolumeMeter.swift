import Foundation
import NIOConcurrencyHelpers

/// Bytes this process fetched from origins that the day's count (`download_volume` in `items.sqlite`) does not
/// have yet: noted on the event loop (a lock, no I/O), added to the count between resources.
final class VolumeMeter: Sendable {
    private struct State {
        var pending: Int64 = 0
        var recorded: Int64 = 0
        var day = ""
        var lastWrite: ContinuousClock.Instant?
    }

    private let state = NIOLockedValueBox(State())

    func add(_ bytes: Int) {
        state.withLockedValue { $0.pending += Int64(bytes) }
    }

    /// The day's count with this process's pending bytes added to it. Writes them when `force` or once a second;
    /// a failed write keeps them for the next time.
    func used(items: ItemStore, policies: DownloadPolicies, force: Bool) -> Int64 {
        let day = policies.day(of: policies.clock())
        let (pending, due) = state.withLockedValue { state -> (Int64, Bool) in
            let due = force || state.day != day || state.lastWrite.map { ContinuousClock.now - $0 >= .seconds(1) } ?? true
            guard due else { return (0, false) }
            defer { state.pending = 0 }
            return (state.pending, true)
        }
        guard due else { return state.withLockedValue { $0.recorded + $0.pending } }
        do {
            // Nothing to add: a read (other processes may have added theirs).
            let recorded = pending > 0 ? try items.addVolume(pending, day: day) : try items.volume(day: day)
            return state.withLockedValue { state in
                state.day = day
                state.recorded = recorded
                state.lastWrite = .now
                return recorded + state.pending
            }
        } catch {
            return state.withLockedValue { state in
                state.pending += pending
                return (state.day == day ? state.recorded : 0) + state.pending
            }
        }
    }
}
