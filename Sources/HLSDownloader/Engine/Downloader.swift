import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSKeys
import HLSOrigin
import HLSPlaylist
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The download engine (docs/design.md §5): reads an item's playlists, chooses its renditions and stores the first
/// N seconds of each — playlists raw (the proxy rewrites them), segments, init sections and keys — through
/// ``CacheStore`` writers, skipping what is already stored.
///
/// One instance per process; ``run(_:)`` downloads one item in the calling task (a ``DownloadScheduler``
/// runs several). State changes go through ``ItemStore`` (so `pause` or `rm` from another process stop a
/// running download within ``DownloaderConfiguration/statePollInterval``) and are reported as
/// ``DownloadEvent``s.
package final class Downloader: Sendable {
    /// The cache objects go to.
    package let store: CacheStore
    /// The items table.
    package let items: ItemStore
    /// The settings: those given to ``init``, with those ``reconfigure(_:)`` replaced since.
    package var configuration: DownloaderConfiguration { state.withLockedValue { $0.configuration } }
    /// What changes after ``init``: the settings, the runs, the bandwidth cap and the live share, under one lock.
    private struct State {
        var configuration: DownloaderConfiguration
        /// See ``runningTask(_:)``.
        var runs: [String: Task<DownloadPlan, any Error>] = [:]
        /// See ``limiter``.
        var limiter: RateLimiter?
        /// See ``liveShare``.
        var liveShare: (server: String, client: OriginClient)?
        /// Origin bytes not yet added to the day's count (``DownloadPolicies/dailyBytes``).
        var volume = VolumeCount()
    }
    private let state: NIOLockedValueBox<State>
    let origin: OriginClient
    let eventLoopGroup: any EventLoopGroup
    let threadPool: NIOThreadPool
    /// Where written bodies are committed (fsync, rename, index row): not `threadPool`, whose few threads the
    /// transfers need for their writes while an fsync waits for the disk.
    var commitThreadPool: NIOThreadPool { explicitCommitThreadPool ?? Self.sharedCommitThreads }
    private let explicitCommitThreadPool: NIOThreadPool?
    /// The runs of this process, by item id: a transition whose action stops the download cancels it here
    /// (``transition(_:_:change:)``); other processes' runs notice the new state within their poll interval.
    func runningTask(_ id: String) -> Task<DownloadPlan, any Error>? { state.withLockedValue { $0.runs[id] } }
    private func setRun(_ id: String, _ work: Task<DownloadPlan, any Error>?) { state.withLockedValue { $0.runs[id] = work } }
    /// The process's bandwidth cap (``DownloaderConfiguration/bytesPerSecond``), `nil` without one.
    var limiter: RateLimiter? { state.withLockedValue { $0.limiter } }
    /// Runs `body` on the day's volume count (``VolumeCount``), under the downloader's lock.
    func withVolume<R>(_ body: (inout VolumeCount) -> R) -> R { state.withLockedValue { body(&$0.volume) } }
    let logger: Logger
    /// The encrypted key store: keys are kept there (sealed), never as cache objects.
    let keys: KeyService
    private let onEvent: @Sendable (DownloadEvent) -> Void
    /// Where a recording's segments and init sections are requested when this process also serves viewers
    /// (``shareLiveFetches(through:client:)``): the server's own proxy path, so a viewer and a recording share one
    /// origin request per segment.
    var liveShare: (server: String, client: OriginClient)? { state.withLockedValue { $0.liveShare } }

    /// - Parameters:
    ///   - origin: a client on `eventLoopGroup`; give it `retry.maxRetries = 0`, the downloader retries each
    ///     resource itself (``DownloaderConfiguration/attempts``).
    ///   - commitThreadPool: where stored resources are committed; by default ``sharedCommitThreads``, started
    ///     when the first download commits (a process that never downloads starts no threads for it).
    ///   - onEvent: called for every state change and progress step, from any task.
    package init(
        store: CacheStore, items: ItemStore, origin: OriginClient, eventLoopGroup: any EventLoopGroup,
        threadPool: NIOThreadPool = .singleton, commitThreadPool: NIOThreadPool? = nil,
        configuration: DownloaderConfiguration = DownloaderConfiguration(),
        keys: KeyService, logger: Logger, onEvent: @escaping @Sendable (DownloadEvent) -> Void = { _ in }
    ) {
        explicitCommitThreadPool = commitThreadPool
        self.keys = keys
        self.store = store
        self.items = items
        self.origin = origin
        self.eventLoopGroup = eventLoopGroup
        self.threadPool = threadPool
        self.state = NIOLockedValueBox(
            State(configuration: configuration, limiter: configuration.bytesPerSecond.map { RateLimiter(bytesPerSecond: max(1, $0)) }))
        self.logger = logger
        self.onEvent = onEvent
        // Items tell what the cache evicted of them, whichever write of this process evicted it (the other process
        // sharing the cache tells its own); off the evicting thread, which may be a transfer's.
        store.onEviction { [weak self] keys in
            guard let self else { return }
            _ = self.threadPool.runIfActive(eventLoop: self.eventLoopGroup.any()) { self.noteEvicted(keys) }
        }
    }

    /// The default commit threads: two, started on first use, running until the process ends (like
    /// `NIOThreadPool.singleton`). Commits mostly wait for the disk, so they do not compete for the CPU.
    package static let sharedCommitThreads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        return pool
    }()

    /// Requests the media of live recordings through `server` (this process's own proxy, `http://127.0.0.1:PORT`) with
    /// `client` (one allowed to reach it): a segment a viewer is fetching is joined, not fetched again, and one a
    /// viewer stored is a hit.
    package func shareLiveFetches(through server: String, client: OriginClient) {
        state.withLockedValue { $0.liveShare = (server, client) }
    }

    /// Takes the settings of `downloads` that change live (a reload, a policy change; docs/operations.md#reload): the
    /// bandwidth cap, the download policies, the concurrent items, the default seconds and auto-purge. The others
    /// stay as given to ``init``.
    package func reconfigure(_ downloads: DownloaderConfiguration) async {
        state.withLockedValue {
            $0.configuration.concurrentItems = downloads.concurrentItems
            $0.configuration.defaultSeconds = downloads.defaultSeconds
            $0.configuration.autoPurgeExpired = downloads.autoPurgeExpired
        }
        await reconfigure(bytesPerSecond: downloads.bytesPerSecond, policies: downloads.policies)
    }

    /// Replaces the process's bandwidth cap and the download policies (a reload; docs/operations.md#reload). The new
    /// cap holds the transfers in flight from their next chunk on (a cap set where there was none, from the next
    /// item run); the policies apply to the next decision that reads them (an item's start, the scheduler's pass).
    package func reconfigure(bytesPerSecond: Int64?, policies: DownloadPolicies) async {
        let previous = state.withLockedValue { state -> RateLimiter? in
            let previous = state.limiter
            if previous == nil { state.limiter = bytesPerSecond.map { RateLimiter(bytesPerSecond: max(1, $0)) } }
            if bytesPerSecond == nil { state.limiter = nil }
            state.configuration.bytesPerSecond = bytesPerSecond
            state.configuration.policies = policies
            return previous
        }
        // Transfers in flight hold the old bucket: it takes the new rate (or, the cap removed, lets them run free).
        await previous?.setRate(bytesPerSecond.map { max(1, $0) })
    }

    func emit(_ event: DownloadEvent) {
        onEvent(event)
    }

    func emitState(_ item: DownloadItem) {
        emit(.stateChanged(id: item.id, state: item.state, errorCode: item.errorCode))
    }

    // MARK: - Running an item

    /// Downloads the item until it is `cached`, `partiallyCached`, `failed`, or stopped (`paused`, `deleted`,
    /// `expired` by a command, `idle` when this task is cancelled).
    ///
    /// - Returns: the item as stored at the end.
    /// - Throws: ``DownloadError/unknownItem``; ``DownloadError/invalidState`` when the item is not runnable
    ///   (another live process downloads it, or it is paused or settled).
    @discardableResult
    package func run(_ id: String) async throws(DownloadError) -> DownloadItem {
        try items.recoverInterrupted()
        // A policy (outside the download hours, the day's volume used up) holds it back: `idle` until allowed.
        if let current = try items.item(id), current.state.isRunnable, let (reason, until) = policyHold(for: current) {
            return try hold(id, reason, until: until)
        }
        guard let item = try items.claim(id) else {
            let current = try items.require(id)
            if current.state.isActive, let owner = current.ownerPID {
                throw DownloadError.invalidState.with("item \(id) is being downloaded by process \(owner)")
            }
            throw DownloadError.invalidState.with("item \(id) is \(current.state.rawValue); resume it first")
        }
        // The `.start` transition: its action, downloading, is this run.
        emitState(item)
        if let expiry = item.expiresAt, expiry <= Date() {
            return try finishExpired(id)
        }
        let work = Task { () async throws -> DownloadPlan in try await self.download(item) }
        setRun(id, work)
        let watcher = Task {
            // Another process (or command) changed the state: stop at once.
            while !Task.isCancelled {
                try? await Task.sleep(for: configuration.statePollInterval)
                let found: DownloadItem?
                do { found = try items.item(id) } catch { continue }
                // Gone (`rm` without --keep-metadata) or changed: stop.
                guard let current = found else {
                    work.cancel()
                    return
                }
                if !current.state.isActive || current.ownerPID != getpid() || (current.expiresAt.map { $0 <= Date() } ?? false) {
                    work.cancel()
                    return
                }
            }
        }
        let result = await withTaskCancellationHandler {
            await work.result
        } onCancel: {
            work.cancel()
        }
        setRun(id, nil)
        watcher.cancel()
        return try settle(id, result: result, bytesAtStart: item.bytesDone)
    }

    /// Persists how a run ended: finished, failed, or interrupted — by a stop (no reason, runnable at once) or by an
    /// unavailable origin (`idle` with the error as its reason and a next attempt, unless
    /// ``DownloaderConfiguration/waitForOrigin`` is off).
    private func settle(_ id: String, result: Result<DownloadPlan, any Error>, bytesAtStart: Int64) throws(DownloadError) -> DownloadItem {
        let current = try items.require(id)
        if !current.state.isActive || current.ownerPID != getpid() {
            // A command took over (pause, rm, expiry from another process); it already persisted its state.
            if current.state == .expired || (current.expiresAt.map { $0 <= Date() } ?? false) { return try finishExpired(id) }
            return current
        }
        if let expiry = current.expiresAt, expiry <= Date() { return try finishExpired(id) }
        let outcome: (ItemStateMachine.Event, String?)
        var waitFor: DownloadError?
        var holdFor: (reason: DownloadError, until: Date)?
        switch result {
        case .success(let plan):
            outcome = (.finish(partial: plan.isPartial), nil)
        case .failure(let error):
            let failure = DownloadError.from(error)
            if failure == .cancelled || error is CancellationError {
                outcome = (.interrupt, nil)
            } else if failure.isPolicyHold {
                // Judged again now: the window may have opened (or the day turned) since; then it runs again at once.
                holdFor = (failure, policyHold(for: current)?.until ?? self.now)
                outcome = (.hold, failure.message)
            } else if failure.isTransient && configuration.waitForOrigin {
                outcome = (.interrupt, failure.message)
                waitFor = failure
            } else {
                outcome = (.fail(code: failure.code), failure.message)
                logger.warning("item \(id) failed: \(failure)")
            }
        }
        let now = Date()
        let configuration = self.configuration
        let item = try transition(id, outcome.0) { [waitFor, holdFor] item in
            if let message = outcome.1 { item.errorMessage = message }
            if case .finish = outcome.0 { item.bytesTotal = item.bytesDone }
            if let holdFor {
                item.errorCode = holdFor.reason.code
                item.nextAttemptAt = holdFor.until
                item.interruptedAt = item.interruptedAt ?? now
                return
            }
            guard let waitFor else { return }
            // A run that stored something found the origin up: the wait starts over from the shortest interval.
            if item.bytesDone > bytesAtStart || item.interruptedAt == nil {
                item.interruptions = 0
                item.interruptedAt = now
            }
            item.interruptions += 1
            item.errorCode = waitFor.code
            item.nextAttemptAt = now.addingTimeInterval(Self.seconds(configuration.idleRetryDelay(after: item.interruptions)))
        }
        if let holdFor { logger.notice("item \(id) is held back: \(holdFor.reason.message)") }
        if let waitFor, let next = item.nextAttemptAt {
            logger.notice("item \(id) is waiting for the origin (\(waitFor)); next attempt at \(next.ISO8601Format())")
        }
        return item
    }

    static func seconds(_ duration: Duration) -> TimeInterval {
        let (seconds, attoseconds) = duration.components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }

    /// Expires the item (again, when another process did: what this run stored since goes too); a deleted one is
    /// deleted again for the same reason.
    private func finishExpired(_ id: String) throws(DownloadError) -> DownloadItem {
        try transition(id, try items.require(id).state == .deleted ? .delete : .expire)
    }

    /// Everything a run does, in the run's task; cancelled by pause, rm or shutdown.
    private func download(_ item: DownloadItem) async throws -> DownloadPlan {
        // The item's own cap (`hlscache set --rate`), else `downloads.itemRate`, inside the process's.
        let itemRate = item.rateLimit ?? configuration.policies.itemBytesPerSecond
        let counter = RunCounter(
            limiter: itemRate.map { RateLimiter(bytesPerSecond: max(1, $0), then: limiter) } ?? limiter, volume: { [self] in addVolume($0) },
            transfers: configuration.resourcesPerItem)
        // A live recording follows its playlists instead of planning them once (Recording/).
        if item.record != nil { return try await record(item, counter: counter) }
        let plan = try await makePlan(for: item, storing: true)
        try checkSize(plan, for: item)
        let estimate = plan.estimatedBytes
        let segmentCount = plan.segmentCount
        let resources = plan.resources.map {
            ItemResource(key: $0.key.value, url: $0.url.string, kind: $0.kind.rawValue, size: $0.knownLength)
        }
        try items.setResources(item.id, resources)
        // The total as every progress write computes it — stored sizes plus the estimate's share for what is left —
        // not the whole-stream estimate: a resumed item has stored more than that estimate's share of it (or, with
        // no BANDWIDTH to estimate from, the total would equal what is done).
        let estimator = Self.estimator(estimate: estimate, segments: segmentCount)
        let totals = try items.resourceTotals(item.id)
        let planned = try items.update(item.id) { stored in
            stored.renditions = plan.renditions.map(\.selected.url)
            stored.segmentsTotal = segmentCount
            stored.bytesDone = totals.bytesDone
            stored.segmentsDone = totals.segmentsDone
            stored.bytesTotal = max(totals.bytesDone, estimator(totals))
        }
        emit(.planned(id: item.id, resources: plan.resources.count, segments: segmentCount, estimatedBytes: estimate))
        emit(
            .progress(
                id: item.id,
                progress: DownloadProgress(
                    bytesDone: planned.bytesDone, bytesTotal: planned.bytesTotal, segmentsDone: planned.segmentsDone,
                    segmentsTotal: planned.segmentsTotal, bytesPerSecond: nil)))
        for note in plan.notes { emit(.note(id: item.id, message: note)) }
        try checkFits(plan)

        let progress = ProgressBatch(
            id: item.id, items: items, estimator: estimator,
            interval: configuration.progressWriteInterval, speed: { counter.movingRate }
        ) { [self] id, counts in
            emit(
                .progress(
                    id: id,
                    progress: DownloadProgress(
                        bytesDone: counts.bytesDone, bytesTotal: counts.bytesTotal, segmentsDone: counts.segmentsDone,
                        segmentsTotal: counts.segmentsTotal, bytesPerSecond: counter.movingRate)))
        }
        for playlist in plan.playlists {
            try progress.add(playlist.key, size: store.lookup(playlist.key)?.size ?? 0)
        }
        do {
            try await storeMedia(of: plan, for: item, counter: counter, progress: progress, bytesAtStart: planned.bytesDone)
        } catch {
            // What was fetched counts in the day's volume, what was stored in the progress, whatever stopped the run
            // (pause, rm, a failure).
            _ = usedVolume(policies: configuration.policies, force: true)
            recordItemVolume(of: item.id, counter: counter)
            try? progress.flush()
            evictIfRemoved(item.id, resources)
            throw error
        }
        _ = usedVolume(policies: configuration.policies, force: true)
        recordItemVolume(of: item.id, counter: counter)
        try progress.flush()
        evictIfRemoved(item.id, resources)
        // A poster that could not be stored is not part of the item (``posterFailed``); one stored clears the reason an
        // earlier run recorded.
        var kept = plan
        let current = try items.item(item.id)
        if let poster = kept.media.first(where: { $0.isPoster }) {
            if store.lookup(poster.key) == nil {
                kept.media.removeAll(where: { $0.isPoster })
            } else if current?.posterError != nil {
                try items.update(item.id) { $0.posterError = nil }
            }
        }
        let lockedNow = current?.locked ?? false
        if item.locked || lockedNow {
            // Not best effort: an object left unlocked here could be evicted from a locked item.
            do {
                try store.setLocked(kept.resources.map(\.key), true)
            } catch {
                throw DownloadError.from(error)
            }
        }
        try await checkStillStored(kept)
        return plan
    }

    /// `rm` (from this process or another) does not wait for a running download, so a commit landing after its
    /// eviction would leave one of the item's objects behind — locked, if the item was. Once the run's commits are
    /// done, an item found deleted or gone has this run's resources evicted again (those no other item lists).
    private func evictIfRemoved(_ id: String, _ resources: [ItemResource]) {
        let current: DownloadItem?
        do { current = try items.item(id) } catch { return }
        guard current == nil || current?.state == .deleted else { return }
        do throws(DownloadError) {
            try evict(resources, of: id)
        } catch {
            logger.warning("item \(id) was removed during its download; evicting what the download stored: \(error)")
        }
    }
}
