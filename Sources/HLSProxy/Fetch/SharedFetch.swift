import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// One origin download shared by every client that asks for the same resource while it is in flight
/// (docs/design.md §6): the bytes go to the cache file and to each client as they arrive. At most a window of the body
/// (`limits.inFlightBuffer`) is in memory; a client that joins late or falls behind reads what has arrived from the
/// growing cache file, then follows the live edge. Playlists are collected whole, rewritten once and handed to
/// every waiting client. The decisions are ``SharedFetchStateMachine``'s; this class runs its actions.
///
/// Thread model: the origin calls the `OriginStreamHandler` methods on its event loop, the cache file reports from
/// the thread pool, and subscriptions live on their clients' event loops and pull with ``view(from:)``. Each event
/// takes the lock once, asks the state machine, and runs the resulting action outside the lock.
final class SharedFetch: OriginStreamHandler, Sendable {
    /// What a client can read now (``SharedFetchStateMachine/View``) and the file to read the part behind the
    /// window from.
    struct View {
        var state: SharedFetchStateMachine.View
        var file: (any FetchFile)?
    }

    private struct Locked {
        var machine: SharedFetchStateMachine
        var subscribers: [ObjectIdentifier: FetchSubscription] = [:]
        var fill: CacheFill?
        var file: (any FetchFile)?
        var task: OriginTask?
        /// The origin's pending read while the window is full.
        var paused: EventLoopPromise<Void>?
        /// The origin's pending read while the global memory budget is used up, and its waiter id.
        var budgetWait: (promise: EventLoopPromise<Void>, id: Int?)?
    }

    let key: CacheKey
    let url: OriginURL
    /// Whether the result is stored (false for LL-HLS blocking requests, which are per-request).
    let cacheable: Bool
    /// Why it was started: for a client, or for no client (read-ahead, which may be cancelled while nobody watches
    /// it; the background fill of a Range miss).
    let purpose: FetchPurpose
    private let services: ProxyServices
    private let state: NIOLockedValueBox<Locked>
    private let startedAt = ContinuousClock.now

    /// - Parameter purpose: other than `.client`, started for no client: the body is downloaded only if it is worth
    ///   storing (a known length within `cache.maxObjectSize`).
    init(key: CacheKey, url: OriginURL, cacheable: Bool, purpose: FetchPurpose = .client, services: ProxyServices) {
        // A channel of an IPTV channel list the proxy served: a body without a length is a live stream, not stored.
        let isChannel = services.playlists.isChannel(url)
        self.key = key
        self.url = url
        self.cacheable = cacheable
        self.purpose = purpose
        self.services = services
        let configuration = services.configuration
        let limits = SharedFetchStateMachine.Limits(
            window: Int64(configuration.maxInFlightBufferBytes), maxPlaylistBytes: Int64(configuration.maxPlaylistBytes),
            maxObjectBytes: configuration.maxObjectBytes)
        self.state = NIOLockedValueBox(
            Locked(
                machine: SharedFetchStateMachine(
                    limits: limits, url: url, cacheable: cacheable, unwatched: purpose != .client, isChannel: isChannel)))
    }

    deinit {
        // Whatever is still held (a fetch dropped mid-way) leaves the global count.
        services.inFlight.release(state.withLockedValue { $0.machine.heldBytes })
    }

    func start() {
        // A playlist is text worth compressing on the way (the client decodes it); media is asked for as it is.
        let compressed = MediaTypes.isPlaylist(contentType: nil, pathExtension: url.pathExtension)
        let task = services.origin.stream(url, headers: compressed ? [OriginClient.acceptCompressed] : [], handler: self)
        state.withLockedValue { $0.task = task }
    }

    /// Why the fetch failed, once it has.
    var failure: (any HTTPMappableError)? {
        state.withLockedValue { $0.machine.failure }
    }

    /// Whether it failed because the origin did (``SharedFetchStateMachine/failedAtOrigin``).
    var failedAtOrigin: Bool {
        state.withLockedValue { $0.machine.failedAtOrigin }
    }

    /// Adds a client reading from its ``FetchSubscription/startOffset``. Returns false when the fetch cannot serve it
    /// from there (it failed, or the bytes before its memory window are not on disk).
    func subscribe(_ subscription: FetchSubscription) -> Bool {
        let accepted = state.withLockedValue { locked -> Bool in
            guard
                let at = locked.machine.subscribe(
                    ObjectIdentifier(subscription), from: subscription.startOffset, joiningLive: subscription.wantsWholeBody)
            else { return false }
            // Joined a never-ending stream where it is now: set before the subscription can be pumped.
            if at != subscription.startOffset { subscription.joined(at: at) }
            locked.subscribers[ObjectIdentifier(subscription)] = subscription
            return true
        }
        if accepted { subscription.eventLoop.execute { subscription.pump() } }
        return accepted
    }

    func unsubscribe(_ subscription: FetchSubscription) {
        handle { locked in
            locked.subscribers[ObjectIdentifier(subscription)] = nil
            return locked.machine.unsubscribe(ObjectIdentifier(subscription))
        }
    }

    /// A subscriber took the body up to `offset`; may let go of memory and let a paused origin continue.
    func progress(_ subscription: FetchSubscription, to offset: Int64) {
        handle { $0.machine.progress(ObjectIdentifier(subscription), to: offset) }
    }

    /// Stops a read-ahead nobody is reading (the player switched rendition); nothing half-written is kept.
    /// Returns whether it was cancelled.
    @discardableResult
    func cancelIfUnwatched() -> Bool {
        guard purpose == .readAhead else { return false }
        let action = handle { $0.machine.cancelUnwatched(ProxyError.unavailable("read-ahead of \(url) cancelled")) }
        return action.failure != nil
    }

    /// Clients reading it now.
    var subscriberCount: Int {
        state.withLockedValue { $0.subscribers.count }
    }

    /// What a client at `offset` can read now.
    func view(from offset: Int64) -> View {
        state.withLockedValue { View(state: $0.machine.view(from: offset), file: $0.file) }
    }

    /// Bytes received so far, the first byte a newcomer can be served from, and whether the head is known (for
    /// deciding how to serve a Range on a miss).
    var progressInfo: (head: FetchHead?, received: Int64, servableFrom: Int64, failed: Bool) {
        state.withLockedValue { $0.machine.progress }
    }

    // MARK: - OriginStreamHandler

    func didReceiveHead(_ head: OriginResponseHead) {
        services.metrics.originResponded(after: ContinuousClock.now - startedAt)
        handle { $0.machine.headReceived(head) }
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        var eventLoop = services.anyEventLoop
        var pause: EventLoopPromise<Void>?
        var collecting = false
        let action = handle { locked in
            if let loop = locked.task?.eventLoop { eventLoop = loop }
            let action = locked.machine.bodyReceived(buffer)
            if action.pausesOrigin && action.failure == nil {
                let promise = eventLoop.makePromise(of: Void.self)
                locked.paused = promise
                pause = promise
            }
            collecting = locked.machine.progress.head?.isPlaylist ?? true
            return action
        }
        if action.failure != nil { return eventLoop.makeFailedFuture(OriginError.cancelled) }
        // Waiting for the disk: what the fill holds back to write in one go is written now (CacheFill.coalesceBytes).
        if let pause {
            state.withLockedValue { $0.fill }?.flush()
            return pause.futureResult
        }
        // Past the global budget, the next read waits for another download to let go (playlists, bounded by their
        // own cap and needed whole, are not held up).
        if !collecting, services.inFlight.isExhausted {
            state.withLockedValue { $0.fill }?.flush()
            return waitForBudget(on: eventLoop)
        }
        return eventLoop.makeSucceededVoidFuture()
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        // The end may come while a read is held back (the origin client does not wait for it): nothing waits on it any
        // more, and a promise must not outlive the fetch unfulfilled. Taken in the same locked event.
        var paused: EventLoopPromise<Void>?
        var budget: (promise: EventLoopPromise<Void>, id: Int?)?
        handle { locked in
            let action = locked.machine.originFinished(result)
            paused = locked.paused
            budget = locked.budgetWait
            locked.paused = nil
            locked.budgetWait = nil
            return action
        }
        paused?.succeed()
        if let budget {
            if let id = budget.id { services.inFlight.cancel(id) }
            budget.promise.succeed()
        }
    }

    // MARK: - Running actions

    /// Takes the lock once for `event`, then runs the effects it returns, in order: under the lock, what concerns
    /// the locked state (the cache file made or let go, the paused origin and the budget wait taken, the clients to
    /// tell); then the rest outside it — memory given back to the budget once for the event, the failure or the cache
    /// file's effects, and last the wake-ups (a resumed origin may deliver its next chunk at once, which must find
    /// this event's effects done).
    @discardableResult
    private func handle(_ event: (inout Locked) -> SharedFetchStateMachine.Action) -> SharedFetchStateMachine.Action {
        var notify: [FetchSubscription] = []
        var resume: EventLoopPromise<Void>?
        var budget: (promise: EventLoopPromise<Void>, id: Int?)?
        var task: OriginTask?
        var stopFill: CacheFill?
        var fill: CacheFill?
        let action = state.withLockedValue { locked -> SharedFetchStateMachine.Action in
            let action = event(&locked)
            for effect in action {
                switch effect {
                case .begin(let head, store: true):
                    locked.fill = makeFill(head: head)
                    fill = locked.fill
                case .notify:
                    notify = Array(locked.subscribers.values)
                case .resumeOrigin:
                    if let paused = locked.paused { resume = paused }
                    locked.paused = nil
                case .fail:
                    if let paused = locked.paused { resume = paused }
                    locked.paused = nil
                    budget = locked.budgetWait
                    locked.budgetWait = nil
                    task = locked.task
                    if let current = locked.fill { stopFill = current }
                    locked.fill = nil
                case .abandonFile:
                    if let current = locked.fill { stopFill = current }
                    locked.fill = nil
                case .begin, .store, .commit, .processPlaylist, .pauseOrigin, .remove, .releaseMemory:
                    break
                }
            }
            if fill == nil { fill = locked.fill ?? stopFill }
            return action
        }
        services.inFlight.release(action.memoryReleased)
        let failed = action.failure != nil
        for effect in action {
            switch effect {
            case .fail(let error, let origin):
                if origin { services.metrics.originFailed(code: error.code) }
                // The origin failing is worth a notice; a cancellation (a read-ahead the player left) is routine.
                logUnstoredLiveSegment(error.message, level: origin ? .notice : .debug)
                stopFill?.abort()
                task?.cancel()
                services.fetches.remove(self)
            case .store(let chunk) where !failed:
                fill?.append(chunk)
            case .abandonFile where !failed:
                stopFill?.abort()
                services.logger.debug("not caching: grew past cache.maxObjectSize", metadata: ["url": "\(url.redacted)"])
            case .commit(let head) where !failed:
                if let fill { storeSegment(fill, head: head) }
            case .processPlaylist(let head, let body) where !failed:
                processPlaylist(head: head, body: body)
            case .remove where !failed:
                services.fetches.remove(self)
            default:
                break
            }
        }
        resume?.succeed()
        if let budget {
            if let id = budget.id { services.inFlight.cancel(id) }
            budget.promise.succeed()
        }
        for subscriber in notify { subscriber.eventLoop.execute { subscriber.pump() } }
        return action
    }

    /// Called under the lock: a fill reporting its progress back into this fetch.
    private func makeFill(head: FetchHead) -> CacheFill {
        CacheFill(
            store: services.store, key: key, expectedLength: head.contentLength, slicing: slicing(head), threadPool: services.threadPool,
            logger: services.logger, label: url.redacted,
            coalesceBytes: Self.coalesceBytes(window: services.configuration.maxInFlightBufferBytes),
            failed: { [failures = services.cacheWriteFailures, label = url.redacted] in failures.record($0, label: label) },
            events: { [weak self] event in self?.fillReported(event) })
    }

    /// The bytes a fill writes at once: 512 KiB (large folios for every later sendfile of the file), or a quarter of
    /// the download's memory window when that is smaller, so the window always holds a write's worth.
    static func coalesceBytes(window: Int) -> Int {
        min(512 << 10, max(0, window / 4))
    }

    /// How the body is stored as slices (docs/architecture.md, "Slices"), or nil to store it whole: a large object — a
    /// known length above the threshold (8 slices) — whose versions can be told apart (a strong `ETag`, else
    /// `Last-Modified`), as a `Range` request's slices are. Still one origin request: only the disk side is cut, so
    /// clients stream as from any download, later ranges are hits, and eviction works per slice. A live stream's
    /// segment (stored with an expiry) stays whole.
    private func slicing(_ head: FetchHead) -> CacheFill.Slicing? {
        let layout = services.sliceLayout
        guard let total = head.contentLength, layout.isSliced(total: total), !head.isPlaylist,
            let validator = SliceResponse.validator(strongETag: head.etag, lastModified: head.lastModified, total: total),
            services.playlists.liveExpiry(of: key) == nil
        else { return nil }
        return CacheFill.Slicing(
            layout: layout, validator: validator, objectSize: total, contentType: head.contentType,
            lastModified: head.lastModified.flatMap(HTTPDate.parse).map { Date(timeIntervalSince1970: TimeInterval($0)) })
    }

    private func fillReported(_ event: CacheFill.Event) {
        switch event {
        case .opened(let file):
            handle { locked in
                let action = locked.machine.fileOpened()
                locked.file = file
                return action
            }
        case .written(let total):
            handle { $0.machine.fileWritten(total) }
        case .stopped:
            handle { $0.machine.fileStopped() }
        }
    }

    private func waitForBudget(on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let promise = eventLoop.makePromise(of: Void.self)
        state.withLockedValue { $0.budgetWait = (promise, nil) }
        let id = services.inFlight.whenAvailable { [weak self] in
            guard let self else { return }
            let waiting = self.state.withLockedValue { locked -> EventLoopPromise<Void>? in
                defer { locked.budgetWait = nil }
                return locked.budgetWait?.promise
            }
            waiting?.succeed()
        }
        state.withLockedValue { locked in
            if locked.budgetWait != nil { locked.budgetWait?.id = id }
        }
        return promise.futureResult
    }

    /// Commits the cache entry once every chunk is on disk; until then late joiners are still served by this fetch.
    private func storeSegment(_ fill: CacheFill, head: FetchHead) {
        let kind: CacheObjectKind = MediaTypes.forExtension(url.pathExtension) == "application/octet-stream" ? .key : .segment
        let lastModified = head.lastModified.flatMap(HTTPDate.parse).map { Date(timeIntervalSince1970: TimeInterval($0)) }
        let expiresAt = services.playlists.liveExpiry(of: key)
        fill.commit(contentType: head.contentType, kind: kind, etag: head.etag, lastModified: lastModified, expiresAt: expiresAt) {
            if $0 == nil { self.logUnstoredLiveSegment("its cache file was not committed", level: .notice) }
            self.state.withLockedValue { $0.fill = nil }
            self.services.fetches.remove(self)
        }
    }

    /// Says why a live stream's segment was not stored (its next reader asks the origin again): the download failed
    /// or was cancelled (`reason`), or its file was not committed.
    private func logUnstoredLiveSegment(_ reason: String, level: Logger.Level) {
        guard cacheable, services.logger.logLevel <= level, services.playlists.liveExpiry(of: key) != nil else { return }
        services.logger.log(
            level: level, "live segment not stored: \(reason)", metadata: ["url": "\(url.redacted)", "purpose": "\(purpose)"])
    }

    private func processPlaylist(head: FetchHead, body: [ByteBuffer]) {
        var collected: [UInt8] = []
        collected.reserveCapacity(body.reduce(0) { $0 + $1.readableBytes })
        for chunk in body { collected.append(contentsOf: chunk.readableBytesView) }
        let bytes = collected
        services.runBlocking { () throws -> RewrittenPlaylist in
            try self.services.playlists.process(
                raw: bytes, key: self.key, url: head.url, store: self.cacheable, tokens: self.services.playlists.tokenDigest(of: self.url),
                contentType: head.originContentType)
        }.whenComplete { result in
            switch result {
            case .success(let playlist):
                if self.cacheable { self.services.playlists.rememberTokens(of: self.url, for: self.key) }
                self.handle { $0.machine.playlistRewritten(playlist) }
            case .failure(let error as any HTTPMappableError):
                self.handle { $0.machine.playlistFailed(error) }
            case .failure(let error):
                let wrapped = ProxyError.corrupted("playlist from \(self.url.host) could not be processed: \(error)")
                self.handle { $0.machine.playlistFailed(wrapped) }
            }
        }
    }
}
