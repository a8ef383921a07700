/// The item life cycle as a pure state machine (docs/design.md §5, §8): every command and every download outcome is
/// an ``Event``; ``handle(_:)`` moves to the next state and returns the ``Action`` the caller must run, or
/// throws ``DownloadError/invalidState`` for an event that does not apply.
///
/// It holds no I/O: the item store persists ``state`` (with what each event means for the item's other fields, in
/// one function) and the downloader runs the actions, also in one function (`Downloader.transition`).
package struct ItemStateMachine: Sendable, Hashable {
    /// Something that happened to an item.
    package enum Event: Sendable, Hashable {
        /// A downloader claimed the item.
        case start
        /// `hlscache pause`.
        case pause
        /// `hlscache resume` (also the way to retry a failed item or extend a cached one).
        case resume
        /// The download stopped without finishing and without giving up: process stopped or killed, origin down.
        case interrupt
        /// Every selected resource is stored; `partial` when only the first N seconds were asked for.
        case finish(partial: Bool)
        /// The retry budget of a resource is spent, or the item cannot be downloaded at all.
        case fail(code: String)
        /// The cache evicted some of its objects (size cap, free-disk cushion); `segmentsLeft` when some of its
        /// segments are still stored.
        case evict(segmentsLeft: Bool)
        /// The expiry passed.
        case expire
        /// `hlscache rm`.
        case delete
        /// A download policy (the daily limit, the window) holds the item back: it waits in `idle` until allowed.
        case hold
    }

    /// What the caller must do after a transition.
    package enum Action: Sendable, Hashable {
        /// Only persist the new state.
        case persist
        /// Persist, and start downloading.
        case startDownload
        /// Persist, and stop the download in flight (if this process runs it).
        case stopDownload
        /// Persist, stop any download in flight, and evict the item's objects from the cache.
        case stopAndEvict
    }

    /// The current state.
    package private(set) var state: ItemState

    /// A machine in `state` (as read from the items table).
    package init(state: ItemState = .queued) {
        self.state = state
    }

    /// Applies `event`.
    /// - Returns: what to do.
    /// - Throws: ``DownloadError/invalidState`` when `event` does not apply to the current state; the state is
    ///   unchanged.
    package mutating func handle(_ event: Event) throws(DownloadError) -> Action {
        switch state {
        case .queued:
            switch event {
            case .start: return move(.downloading, .startDownload)
            case .pause: return move(.paused, .persist)
            case .resume: return move(.queued, .persist)
            case .fail: return move(.failed, .persist)
            case .expire: return move(.expired, .stopAndEvict)
            case .delete: return move(.deleted, .stopAndEvict)
            case .hold: return move(.idle, .persist)
            case .interrupt, .finish, .evict: throw refuse(event)
            }
        case .ready:
            switch event {
            case .resume: return move(.queued, .persist)
            case .fail: return move(.failed, .persist)
            case .expire: return move(.expired, .stopAndEvict)
            case .delete: return move(.deleted, .stopAndEvict)
            case .start, .pause, .interrupt, .finish, .evict, .hold: throw refuse(event)
            }
        case .downloading, .recording:
            switch event {
            case .pause: return move(.paused, .stopDownload)
            case .interrupt: return move(.idle, .stopDownload)
            case .finish(let partial): return move(partial ? .partiallyCached : .cached, .persist)
            case .fail: return move(.failed, .stopDownload)
            case .expire: return move(.expired, .stopAndEvict)
            case .delete: return move(.deleted, .stopAndEvict)
            case .hold: return move(.idle, .stopDownload)
            case .start, .resume, .evict: throw refuse(event)
            }
        case .paused:
            switch event {
            case .resume: return move(.queued, .persist)
            case .expire: return move(.expired, .stopAndEvict)
            case .delete: return move(.deleted, .stopAndEvict)
            case .pause: return move(.paused, .persist)
            case .start, .interrupt, .finish, .fail, .evict, .hold: throw refuse(event)
            }
        case .idle:
            switch event {
            case .start: return move(.downloading, .startDownload)
            case .resume: return move(.queued, .persist)
            case .pause: return move(.paused, .persist)
            case .fail: return move(.failed, .persist)
            case .expire: return move(.expired, .stopAndEvict)
            case .delete: return move(.deleted, .stopAndEvict)
            case .hold: return move(.idle, .persist)
            case .interrupt, .finish, .evict: throw refuse(event)
            }
        case .cached, .partiallyCached, .evicted:
            switch event {
            // Resuming a cached item re-checks it: objects evicted since are fetched again.
            case .resume: return move(.queued, .persist)
            case .evict(let segmentsLeft): return move(segmentsLeft ? .partiallyCached : .evicted, .persist)
            case .expire: return move(.expired, .stopAndEvict)
            case .delete: return move(.deleted, .stopAndEvict)
            case .start, .pause, .interrupt, .finish, .fail, .hold: throw refuse(event)
            }
        case .failed:
            switch event {
            case .resume: return move(.queued, .persist)
            case .expire: return move(.expired, .stopAndEvict)
            case .delete: return move(.deleted, .stopAndEvict)
            case .start, .pause, .interrupt, .finish, .fail, .evict, .hold: throw refuse(event)
            }
        case .expired:
            switch event {
            case .delete: return move(.deleted, .stopAndEvict)
            // Expired again (a run of this process stopping after another process expired the item): what the run
            // stored since is evicted too.
            case .expire: return move(.expired, .stopAndEvict)
            case .start, .pause, .resume, .interrupt, .finish, .fail, .evict, .hold: throw refuse(event)
            }
        case .deleted:
            switch event {
            // `rm` again: what was stored since (a `--keep-metadata` item resumed elsewhere) goes too.
            case .delete: return move(.deleted, .stopAndEvict)
            // `rm --keep-metadata` (PCD's deleteFiles) kept the record: resuming downloads it again.
            case .resume: return move(.queued, .persist)
            case .start, .pause, .interrupt, .finish, .fail, .expire, .evict, .hold: throw refuse(event)
            }
        }
    }

    private mutating func move(_ next: ItemState, _ action: Action) -> Action {
        state = next
        return action
    }

    private func refuse(_ event: Event) -> DownloadError {
        DownloadError.invalidState.with("cannot \(Self.name(of: event)) an item that is \(state.rawValue)")
    }

    private static func name(of event: Event) -> String {
        switch event {
        case .start: "start"
        case .pause: "pause"
        case .resume: "resume"
        case .interrupt: "interrupt"
        case .finish: "finish"
        case .fail: "fail"
        case .expire: "expire"
        case .evict: "evict"
        case .delete: "delete"
        case .hold: "hold"
        }
    }
}
