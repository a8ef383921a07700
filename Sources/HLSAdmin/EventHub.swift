import Foundation
import HLSDownloader
import NIOConcurrencyHelpers

/// Broadcasts item events to every `/events` subscriber (the offline SDKs' listener model).
///
/// Fed by the in-process ``Downloader`` (``publish(_:)`` as its `onEvent`), by the API's own changes, and by a poll
/// of `items.sqlite` (``poll(_:)``, every ``AdminConfiguration/pollInterval``) that notices what other processes
/// (`hlscache fetch`, `pause`, `rm`) changed. The hub remembers the last state and counters it announced per item,
/// so the same change seen by both paths is sent once. Publishing never waits: each subscriber has its own bounded
/// buffer (``EventStream``).
package final class EventHub: Sendable {
    private struct Known: Equatable {
        var state: ItemState
        var error: String?
        var bytes: Int64
        var bytesTotal: Int64
        var segments: Int
        var segmentsTotal: Int
        /// `nil` until an item read tells (an item first announced by a downloader event).
        var locked: Bool?
    }

    private struct State {
        var subscribers: [ObjectIdentifier: EventStream] = [:]
        var known: [String: Known] = [:]
        /// Last progress sent per item, and the newest one held back by the throttle.
        var lastProgressAt: [String: ContinuousClock.Instant] = [:]
        var heldProgress: [String: AdminEvent] = [:]
        var polledOnce = false
        /// Items announced from the downloader's events that no poll has reported yet: an item created and removed
        /// between two polls must still get its `removed` event.
        var unpolled: Set<String> = []
        /// When each item's state was last announced from an event (not a poll): a poll that read the items table
        /// before that moment has an older state and must not announce it (it did: downloading, queued, downloading).
        var announcedAt: [String: ContinuousClock.Instant] = [:]
        /// The `started` event of this server run, sent first on every new stream (nil before ``serverStarted(_:)``).
        var started: ServerStatus?
        /// Told of every event as it is broadcast (the webhooks); they must not wait.
        var observers: [@Sendable (AdminEvent) -> Void] = []
    }

    private let state = NIOLockedValueBox(State())
    /// Held from deciding an event to handing it to every subscriber and observer, so events leave in the order the
    /// hub decided them: a poll that decided `downloading` must not send it after an event decided later sent
    /// `partiallyCached`. Sending never waits (bounded buffers, observers that do not block), and nothing sending
    /// calls back into the hub, so holding it costs nothing. Always taken before `state`, never inside it.
    private let sending = NIOLock()
    let progressInterval: Duration

    /// Called by ``publish(_:)`` just before it waits for its turn to send (tests use it as a barrier to force an
    /// event to arrive while a poll is sending).
    private let beforeSending: (@Sendable (DownloadEvent) -> Void)?

    package init(progressInterval: Duration = .milliseconds(250), beforeSending: (@Sendable (DownloadEvent) -> Void)? = nil) {
        self.progressInterval = progressInterval
        self.beforeSending = beforeSending
    }

    /// The number of connected subscribers.
    package var subscriberCount: Int { state.withLockedValue { $0.subscribers.count } }

    /// The largest number of events queued for one subscriber now (bounded by its capacity).
    package var largestBacklog: Int {
        let streams = state.withLockedValue { Array($0.subscribers.values) }
        return streams.map(\.backlog).max() ?? 0
    }

    /// Adds `stream`; returns the events it gets before any other: the server's `started` (when its filter takes it).
    func subscribe(_ stream: EventStream) -> [AdminEvent] {
        sending.withLock {
            state.withLockedValue { s -> [AdminEvent] in
                s.subscribers[ObjectIdentifier(stream)] = stream
                guard let started = s.started, stream.filter.accepts(.server(started)) else { return [] }
                return [.server(started)]
            }
        }
    }

    /// The server listens (`serve`): `started` goes to the observers (webhooks) once, and opens every stream from now
    /// on (a stream cannot connect before it; one that reconnects learns whether the server restarted).
    package func serverStarted(_ status: ServerStatus) {
        var started = status
        started.phase = .started
        sending.withLock {
            state.withLockedValue { $0.started = started }
            broadcast(.server(started))
        }
    }

    /// The server is stopping: `stopping` to every stream and observer (after ``serverStarted(_:)`` only; an API
    /// without a server, as in tests, sends none).
    func serverStopping() {
        sending.withLock {
            guard var status = state.withLockedValue({ $0.started }) else { return }
            status.phase = .stopping
            broadcast(.server(status))
        }
    }

    func unsubscribe(_ stream: EventStream) {
        _ = state.withLockedValue { $0.subscribers.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    /// A downloader event (pass this as the ``Downloader``'s `onEvent`).
    package func publish(_ event: DownloadEvent) {
        beforeSending?(event)
        sending.withLock { publishInOrder(event) }
    }

    private func publishInOrder(_ event: DownloadEvent) {
        switch event {
        case .stateChanged(let id, let itemState, let error):
            announce(id: id, state: itemState, error: error)
        case .planned:
            // Not a progress event: the estimate is the whole stream's, whatever is stored already (a resumed item has
            // done more than it), and announced `bytesTotal` below `bytes`. The downloader follows it with a
            // `progress` whose total is the stored sizes plus the estimate's share for what is left.
            break
        case .note:
            break  // shown by the CLI; an API client reads the item's renditions
        case .evicted(let id, let itemState, let resources, let bytes, let segments):
            // The counters went down: remembered, so the next poll does not announce them again as progress.
            state.withLockedValue { s in
                if var known = s.known[id] {
                    known.bytes = bytes
                    known.segments = segments
                    s.known[id] = known
                }
            }
            broadcast(.evicted(id: id, state: itemState, resources: resources, bytes: bytes, segments: segments))
        case .progress(let id, let p):
            state.withLockedValue { s in
                if var known = s.known[id] {
                    known.bytes = p.bytesDone
                    known.bytesTotal = p.bytesTotal
                    known.segments = p.segmentsDone
                    known.segmentsTotal = p.segmentsTotal
                    s.known[id] = known
                }
            }
            let event = AdminEvent.progress(
                id: id, bytes: p.bytesDone, bytesTotal: p.bytesTotal, segments: p.segmentsDone, segmentsTotal: p.segmentsTotal,
                bytesPerSecond: p.bytesPerSecond)
            throttle(event, force: p.segmentsTotal > 0 && p.segmentsDone >= p.segmentsTotal)
        }
    }

    /// An item changed by the API itself (created, resumed): announce its state now rather than at the next poll.
    /// `readAt`: when the change began; a state announced from an event since then is newer (the scheduler may
    /// have started a resumed item already) and is not overwritten.
    /// A lock or unlock is announced as a `lock` event (the state does not change).
    package func itemChanged(_ item: DownloadItem, readAt: ContinuousClock.Instant? = nil) {
        sending.lock()
        defer { sending.unlock() }
        let stale = readAt.map { readAt in state.withLockedValue { $0.announcedAt[item.id].map { $0 >= readAt } ?? false } } ?? false
        if !stale { announce(id: item.id, state: item.state, error: item.errorCode) }
        announceLock(id: item.id, locked: item.locked)
    }

    /// Sends `lock` when the item's lock differs from the one known (not for an item whose lock was not known yet).
    private func announceLock(id: String, locked: Bool) {
        let changed = state.withLockedValue { s -> Bool in
            guard var known = s.known[id] else { return false }
            let before = known.locked
            known.locked = locked
            s.known[id] = known
            guard before != nil && before != locked else { return false }
            // A poll whose read began before this has the old lock (as for states).
            s.announcedAt[id] = .now
            return true
        }
        if changed { broadcast(.locked(id: id, locked: locked)) }
    }

    /// The item is gone (removed without metadata).
    package func itemRemoved(_ id: String) {
        sending.lock()
        defer { sending.unlock() }
        let known = state.withLockedValue { s -> Bool in
            s.unpolled.remove(id)
            s.heldProgress[id] = nil
            s.lastProgressAt[id] = nil
            s.announcedAt[id] = nil
            return s.known.removeValue(forKey: id) != nil
        }
        if known { broadcast(.removed(id: id)) }
    }

    /// Sends an event that is not a state or progress change (playback).
    package func send(_ event: AdminEvent) {
        sending.withLock { broadcast(event) }
    }

    /// Announces what the items table says changed since the last poll (``ItemChangeFeed``): state and progress
    /// differences from what was announced, and removals; also releases progress held back by the throttle. The
    /// first poll only learns the items (a new subscriber reads `/items` for the start).
    /// `readAt`: when the read of `changes` began; states announced from events since are newer than the read's.
    package func poll(_ changes: ItemChangeFeed.Changes, readAt: ContinuousClock.Instant = .now) {
        sending.lock()
        defer { sending.unlock() }
        var events: [AdminEvent] = []
        state.withLockedValue { s in
            let first = changes.isFirst || !s.polledOnce
            s.polledOnce = true
            // The first read replaces what the hub knew, except states announced from events after it began: those
            // are newer than the read (it did: queued, downloading, then `downloading` again at the second poll).
            var announcedBefore: [String: Known] = [:]
            if changes.isFirst { swap(&announcedBefore, &s.known) }  // moved, not copied
            for item in changes.changed {
                s.unpolled.remove(item.id)
                var now = Known(
                    state: item.state, error: item.errorCode, bytes: item.bytesDone, bytesTotal: item.bytesTotal,
                    segments: item.segmentsDone, segmentsTotal: item.segmentsTotal, locked: item.locked)
                let before = s.known[item.id]
                if let newer = before ?? announcedBefore[item.id], let announced = s.announcedAt[item.id], announced >= readAt {
                    // An event announced a state after this read began: the read's state is the older one.
                    now.state = newer.state
                    now.error = newer.error
                    now.locked = newer.locked ?? item.locked
                }
                s.known[item.id] = now
                guard !first, before != now else { continue }
                if before?.state != now.state || before?.error != now.error {
                    events.append(.state(id: item.id, state: now.state, error: now.error))
                }
                // Locked or unlocked by another process (`hlscache lock`): the state is the same, the lock is news.
                if let was = before?.locked, was != item.locked {
                    events.append(.locked(id: item.id, locked: item.locked))
                }
                if before.map({
                    ($0.bytes, $0.segments, $0.bytesTotal, $0.segmentsTotal) != (now.bytes, now.segments, now.bytesTotal, now.segmentsTotal)
                })
                    ?? (now.bytes > 0 || now.segments > 0)
                {
                    s.heldProgress[item.id] = nil
                    events.append(
                        .progress(
                            id: item.id, bytes: now.bytes, bytesTotal: now.bytesTotal, segments: now.segments,
                            segmentsTotal: now.segmentsTotal, bytesPerSecond: item.speed().bytesPerSecond))
                }
            }
            for id in changes.removed {
                s.unpolled.remove(id)
                s.lastProgressAt[id] = nil
                s.heldProgress[id] = nil
                s.announcedAt[id] = nil
                // Already announced when the API removed it itself (itemRemoved).
                if s.known.removeValue(forKey: id) != nil, !first { events.append(.removed(id: id)) }
            }
            for (id, held) in s.heldProgress {
                events.append(held)
                s.heldProgress[id] = nil
                s.lastProgressAt[id] = .now
            }
        }
        for event in events { broadcast(event) }
    }

    /// Items announced from events that no poll has reported yet (for ``ItemChangeFeed/next(alsoKnown:)``).
    package var unpolledItems: Set<String> { state.withLockedValue { $0.unpolled } }

    /// Sends a heartbeat comment to every subscriber.
    func ping() {
        let streams = state.withLockedValue { Array($0.subscribers.values) }
        for stream in streams { stream.ping() }
    }

    private func announce(id: String, state itemState: ItemState, error: String?) {
        let changed = state.withLockedValue { s -> Bool in
            var known = s.known[id] ?? Known(state: itemState, error: error, bytes: 0, bytesTotal: 0, segments: 0, segmentsTotal: 0)
            let isNew = s.known[id] == nil
            guard isNew || known.state != itemState || known.error != error else { return false }
            if isNew { s.unpolled.insert(id) }
            known.state = itemState
            known.error = error
            s.known[id] = known
            s.announcedAt[id] = .now
            return true
        }
        if changed { broadcast(.state(id: id, state: itemState, error: error)) }
    }

    private func throttle(_ event: AdminEvent, force: Bool) {
        let send = state.withLockedValue { s -> Bool in
            let now = ContinuousClock.now
            if force || s.lastProgressAt[event.id].map({ now - $0 >= progressInterval }) ?? true {
                s.lastProgressAt[event.id] = now
                s.heldProgress[event.id] = nil
                return true
            }
            s.heldProgress[event.id] = event
            return false
        }
        if send { broadcast(event) }
    }

    /// Calls `observer` with every event the hub sends from now on, in order, whether or not anyone subscribes.
    package func observe(_ observer: @escaping @Sendable (AdminEvent) -> Void) {
        state.withLockedValue { $0.observers.append(observer) }
    }

    private func broadcast(_ event: AdminEvent) {
        for observer in state.withLockedValue({ $0.observers }) { observer(event) }
        let streams = state.withLockedValue { Array($0.subscribers.values) }
        for stream in streams where stream.filter.accepts(event) { stream.enqueue(event) }
    }

    /// Ends every subscription (server stopping): each stream ends once what is queued for it (`stopping` last) is
    /// written, waiting at most `bound` in all; a stream still not written by then (a client that does not read) is
    /// closed.
    func closeAll(within bound: Duration) async {
        let streams = state.withLockedValue { s -> [EventStream] in
            defer { s.subscribers.removeAll() }
            return Array(s.subscribers.values)
        }
        for stream in streams { stream.finish() }
        let deadline = ContinuousClock.now + bound
        while streams.contains(where: { !$0.isClosed }) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        for stream in streams { stream.close(abort: true) }
    }
}
