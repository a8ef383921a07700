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
    /// The settings.
    package let configuration: DownloaderConfiguration
    let origin: OriginClient
    let eventLoopGroup: any EventLoopGroup
    let threadPool: NIOThreadPool
    /// Where written bodies are committed (fsync, rename, index row): not `threadPool`, whose few threads the
    /// transfers need for their writes while an fsync waits for the disk.
    var commitThreadPool: NIOThreadPool { explicitCommitThreadPool ?? Self.sharedCommitThreads }
    private let explicitCommitThreadPool: NIOThreadPool?
    /// The runs of this process, by item id: a transition whose action stops the download cancels it here
    /// (``transition(_:_:change:)``); other processes' runs notice the new state within their poll interval.
    let runs = NIOLockedValueBox<[String: Task<DownloadPlan, any Error>]>([:])
    let limiter: RateLimiter?
    /// Origin bytes not yet added to the day's count (``DownloadPolicies/dailyBytes``).
    let volume = VolumeMeter()
    let logger: Logger
    /// The encrypted key store: keys are kept there (sealed), never as cache objects.
    let keys: KeyService
    private let onEvent: @Sendable (DownloadEvent) -> Void

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
        self.configuration = configuration
        self.limiter = configuration.bytesPerSecond.map { RateLimiter(bytesPerSecond: max(1, $0)) }
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
            if current.state == .downloading, let owner = current.ownerPID {
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
        runs.withLockedValue { $0[id] = work }
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
                if current.state != .downloading || current.ownerPID != getpid() || (current.expiresAt.map { $0 <= Date() } ?? false) {
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
        runs.withLockedValue { $0[id] = nil }
        watcher.cancel()
        return try settle(id, result: result, bytesAtStart: item.bytesDone)
    }

    /// Persists how a run ended: finished, failed, or interrupted — by a stop (no reason, runnable at once) or by an
    /// unavailable origin (`idle` with the error as its reason and a next attempt, unless
    /// ``DownloaderConfiguration/waitForOrigin`` is off).
    private func settle(_ id: String, result: Result<DownloadPlan, any Error>, bytesAtStart: Int64) throws(DownloadError) -> DownloadItem {
        let current = try items.require(id)
        if current.state != .downloading || current.ownerPID != getpid() {
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
        // The item's own cap (`hlscache set --rate`), inside the process's.
        // The item's own cap (`hlscache set --rate`), else `downloads.itemRate`, inside the process's.
        let itemRate = item.rateLimit ?? configuration.policies.itemBytesPerSecond
        let counter = RunCounter(
            limiter: itemRate.map { RateLimiter(bytesPerSecond: max(1, $0), then: limiter) } ?? limiter, volume: volume,
            transfers: configuration.resourcesPerItem)
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
                    segmentsTotal: planned.segmentsTotal, bytesPerSecond: 0)))
        for note in plan.notes { emit(.note(id: item.id, message: note)) }
        try checkFits(plan)

        let progress = ProgressBatch(
            id: item.id, items: items, estimator: estimator,
            interval: configuration.progressWriteInterval
        ) { [self] id, counts in
            emit(
                .progress(
                    id: id,
                    progress: DownloadProgress(
                        bytesDone: counts.bytesDone, bytesTotal: counts.bytesTotal, segmentsDone: counts.segmentsDone,
                        segmentsTotal: counts.segmentsTotal, bytesPerSecond: counter.rate)))
        }
        for playlist in plan.playlists {
            try progress.add(playlist.key, size: store.lookup(playlist.key)?.size ?? 0)
        }
        do {
            try await storeMedia(of: plan, for: item, counter: counter, progress: progress, bytesAtStart: planned.bytesDone)
        } catch {
            // What was fetched counts in the day's volume, what was stored in the progress, whatever stopped the run
            // (pause, rm, a failure).
            _ = volume.used(items: items, policies: configuration.policies, force: true)
            recordItemVolume(of: item.id, counter: counter)
            try? progress.flush()
            evictIfRemoved(item.id, resources)
            throw error
        }
        _ = volume.used(items: items, policies: configuration.policies, force: true)
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

    /// What a task of ``storeMedia(of:for:counter:progress:)`` ended with.
    private enum ResourceStep: Sendable {
        /// A transfer into its temp file: to be committed.
        case written(PlannedResource, WrittenBody)
        /// A resource stored and counted in the progress without a commit of ours (already cached, or a key).
        case stored
        /// A commit done and counted in the progress.
        case committed
    }

    /// At most this many written bodies wait for their commit per item (each holds a temp file open).
    static let pendingCommitsPerItem = 16

    /// Keys, init sections and segments: ``RunCounter/transfers`` at a time (``DownloaderConfiguration/resourcesPerItem``,
    /// fewer once the origin pushed back), each
    /// body committed (fsync, rename, index row) on ``commitThreadPool`` while the next transfers run, at most
    /// ``pendingCommitsPerItem`` commits outstanding. A resource counts as stored (progress) once committed and,
    /// when encrypted, verified.
    private func storeMedia(
        of plan: DownloadPlan, for item: DownloadItem, counter: RunCounter, progress: ProgressBatch, bytesAtStart: Int64
    ) async throws {
        try await withThrowingTaskGroup(of: ResourceStep.self) { group in
            var transfers = 0
            var commits = 0
            func take(_ step: ResourceStep) {
                switch step {
                case .written(let resource, let body):
                    transfers -= 1
                    commits += 1
                    group.addTask {
                        let object: CachedObject
                        do {
                            // Not the async `runIfActive`, which drops queued work when the task is cancelled: a run
                            // that stops (pause, shutdown) still commits what it received whole.
                            object = try await self.commitThreadPool.runIfActive(eventLoop: self.eventLoopGroup.any()) {
                                try body.commit()
                            }.get()
                        } catch {
                            let failure = DownloadError.from(error)
                            throw failure.with("\(resource.url): \(failure.message)")
                        }
                        if !resource.encryptions.isEmpty { try await self.verify(resource) }
                        try progress.add(resource.key, size: object.size)
                        return .committed
                    }
                case .stored: transfers -= 1
                case .committed: commits -= 1
                }
            }
            for resource in plan.media {
                while transfers >= counter.transfers || commits >= Self.pendingCommitsPerItem {
                    guard let step = try await group.next() else { break }
                    take(step)
                }
                try Task.checkCancellation()
                // The download policies, between resources: a run stops at the first boundary past a limit.
                try checkPolicies(during: item, counter: counter, bytesAtStart: bytesAtStart)
                group.addTask {
                    let size: Int64
                    if resource.kind != .key, let cached = self.store.lookup(resource.key) {
                        size = cached.size
                    } else if resource.kind == .key {
                        size = try await self.storeKey(resource, for: item)
                    } else if resource.isPoster {
                        do {
                            return .written(resource, try await self.fetchResource(resource, for: item, counter: counter))
                        } catch  where !Task.isCancelled && !(error is CancellationError) && DownloadError.from(error) != .cancelled {
                            try self.posterFailed(resource, of: item, error: error)
                            return .stored
                        }
                    } else {
                        return .written(resource, try await self.fetchResource(resource, for: item, counter: counter))
                    }
                    try progress.add(resource.key, size: size)
                    return .stored
                }
                transfers += 1
            }
            while let step = try await group.next() { take(step) }
        }
    }

    /// The item's poster could not be fetched (the origin refused it, …): artwork is optional, so the item goes on
    /// without it — the reason kept as its `posterError`, its row removed from the item's resources (its progress and
    /// completeness do not wait for it), a note for the CLI. The next run tries it again.
    func posterFailed(_ resource: PlannedResource, of item: DownloadItem, error: any Error) throws(DownloadError) {
        let failure = DownloadError.from(error)
        let reason = failure.message.isEmpty ? failure.code : failure.message
        try items.removeResource(item.id, key: resource.key.value)
        try items.update(item.id) { $0.posterError = reason }
        logger.notice("item \(item.id): the poster \(resource.url.redacted) was not stored (\(reason)); the item goes on without it")
        emit(.note(id: item.id, message: "the poster \(resource.url.redacted) was not stored (\(reason)); the item goes on without it"))
    }

    /// "Estimated then real": stored sizes, plus for what is left the byte-range lengths the playlists give, or
    /// the BANDWIDTH estimate's share per segment, or (no estimate) the average stored segment size.
    ///
    /// The plan's share comes first: the stored average is biased by what was stored first — the video
    /// rendition's segments, ten times an audio segment — and multiplied a stream's size by 2–4 in the progress
    /// shown, where the BANDWIDTH estimate (an average over every rendition) was within 15 %.
    static func estimator(estimate: Int64?, segments: Int) -> @Sendable (ResourceTotals) -> Int64 {
        { totals in
            let average: Int64
            if let estimate, segments > 0 {
                average = estimate / Int64(segments)
            } else if totals.segmentsDone > 0 {
                average = totals.doneSegmentBytes / Int64(totals.segmentsDone)
            } else {
                average = 0
            }
            return totals.knownBytes + Int64(totals.unknownSegments) * average
        }
    }

    // MARK: - Fetching

    /// Transfers one media resource into a cache writer, with the retry budget; the caller commits it.
    func fetchResource(_ resource: PlannedResource, for item: DownloadItem, counter: RunCounter) async throws -> WrittenBody {
        let attempt: @Sendable () async throws -> WrittenBody = {
            let eventLoop = self.eventLoopGroup.next()
            let handler = StoreStreamHandler(
                store: self.store, key: resource.key, kind: resource.kind, locked: item.locked, threadPool: self.threadPool,
                limiter: counter.limiter, eventLoop: eventLoop, slice: resource.slice, onBytes: { counter.add($0) })
            var headers = item.headers.map { ($0.name, $0.value) }
            if let slice = resource.slice {
                let first = slice.index * slice.layout.sliceSize
                headers.append(("Range", "bytes=\(first)-\(first + slice.layout.sliceSize - 1)"))
            }
            let task = self.origin.stream(self.requestURL(resource.url, for: item), headers: headers, on: eventLoop, handler: handler)
            return try await withTaskCancellationHandler {
                try await handler.futureResult.get()
            } onCancel: {
                task.cancel()
                // A batch waiting for the rate limiter would otherwise hold the transfer until its bytes are due.
                handler.cancel()
            }
        }
        let transfer: @Sendable () async throws -> WrittenBody = {
            let generation = counter.generation
            do {
                return try await attempt()
            } catch let error as OriginError where error == .httpStatus && (error.originStatus == 429 || error.originStatus == 503) {
                // The origin asks for less: this run goes on with half as many transfers at a time.
                if let narrowed = counter.pushedBack(generation: generation) {
                    self.emit(
                        .note(
                            id: item.id, message: "the origin answered \(error.originStatus): \(narrowed) transfer(s) at a time from now on"
                        ))
                }
                throw error
            }
        }
        return try await withRetries(resource.url) {
            do {
                return try await transfer()
            } catch let error as OriginError where error == .httpStatus && (error.originStatus == 401 || error.originStatus == 403) {
                // A CDN's token cookie (set on the top playlist) that this process never got, because the item resumed
                // from stored playlists, or that expired: ask for the top playlist again, then once more for this.
                guard await refreshCookies(for: item) else { throw error }
                return try await transfer()
            }
        }
    }

    /// Asks the origin for the item's top playlist again, only for the cookies it sets (its body is not used, and
    /// a failure changes nothing); at most once a minute per page, shared by the resources waiting on it
    /// (``CookieRefresher``, the proxy's too). Returns whether it ran (no cookie jar: no point).
    private func refreshCookies(for item: DownloadItem) async -> Bool {
        guard origin.cookieJar != nil, let top = try? OriginURL(item.url) else { return false }
        let url = requestURL(top, for: item)
        let headers = [OriginClient.acceptCompressed] + item.headers.map { ($0.name, $0.value) }
        await origin.refreshCookies(from: url, headers: headers, maxBytes: configuration.maxPlaylistBytes, within: .seconds(60))
        logger.debug("asked for \(url.redacted) again for its cookies after a 401/403")
        return true
    }

    /// Runs `body` up to ``DownloaderConfiguration/attempts`` times with exponential backoff and jitter,
    /// retrying only what another attempt can fix (5xx, 408, 429, network, timeouts, short bodies).
    func withRetries<T: Sendable>(_ url: OriginURL, isMaster: Bool = false, _ body: @Sendable () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await body()
            } catch {
                if Task.isCancelled { throw DownloadError.cancelled }
                guard attempt < configuration.attempts, Self.isRetryable(error) else {
                    let failure = DownloadError.from(error, isMaster: isMaster)
                    // What the origin did wrong on every attempt (unreachable, 5xx, 429) may pass; a body of the wrong
                    // length (`corrupted`) is the origin's content, not its availability.
                    throw failure.with("\(url): \(failure.message)").transient(Self.isOutage(error))
                }
                attempt += 1
                logger.debug("retrying \(url) (attempt \(attempt)): \(error)")
                var delay = configuration.delay(beforeAttempt: attempt)
                // A 429/503 that says when to come back is obeyed, up to a minute (a prewarm can wait; nobody watches).
                if let retryAfter = (error as? OriginError)?.retryAfter { delay = max(delay, min(retryAfter, Self.longestRetryAfter)) }
                try await Task.sleep(for: delay)
            }
        }
    }

    /// The longest `Retry-After` a prewarm waits out before an attempt.
    static let longestRetryAfter = Duration.seconds(60)

    /// Whether `error` says the origin is unavailable for now (network, timeout, 5xx, 408, 429): retrying later can
    /// fix it, so an item ends its run `idle`, not `failed`.
    static func isOutage(_ error: any Error) -> Bool {
        guard let error = error as? OriginError else { return false }
        // Credentials the upstream proxy refused (its 407, reported as `network`) do not come right by waiting.
        if error == .network && error.message.contains("(407)") { return false }
        if error == .httpStatus { return error.originStatus >= 500 || error.originStatus == 408 || error.originStatus == 429 }
        return error == .network || error == .timeout || error == .truncated
    }

    static func isRetryable(_ error: any Error) -> Bool {
        switch error {
        case let error as OriginError:
            if error == .httpStatus { return error.originStatus >= 500 || error.originStatus == 408 || error.originStatus == 429 }
            return error == .network || error == .timeout || error == .truncated || error == .busy
        case let error as CacheStoreError:
            return error == .lengthMismatch
        default:
            return false
        }
    }

    // MARK: - Playlists

    /// Reads the item's playlists (from the cache when stored, else from the origin, storing them raw when
    /// `storing`), chooses renditions and lays out every resource.
    ///
    /// With `storing: false` (`--dry-run`) playlists are read into memory only and nothing is written.
    /// - Throws: ``DownloadError/notFound`` (404 on the item's playlist), ``DownloadError/corrupted``,
    ///   ``DownloadError/unsupported`` for live playlists, the network codes.
    package func makePlan(for item: DownloadItem, storing: Bool) async throws(DownloadError) -> DownloadPlan {
        do {
            let url: OriginURL
            do { url = try OriginURL(item.url) } catch { throw DownloadError.corrupted.with("\(item.url): \(error)") }
            let top = try await loadPlaylist(url, item: item, isMaster: true, storing: storing)
            var renditions: [(SelectedPlaylist, MediaPlaylist)] = []
            var playlistURLs = [url]
            var notes: [String] = []
            var tolerated: [String] = Self.toleranceNotes(top.playlist, url: url)
            if top.playlist.isChannelList, let first = top.playlist.warnings.first(where: { $0.kind == .channelList }) {
                throw DownloadError.unsupported.with(
                    "\(url.redacted) is an IPTV channel list (line \(first.line): #EXTINF:-1 …), not a stream: fetch one channel's URL")
            }
            switch top.playlist.kind {
            case .media:
                let media = try top.playlist.media(baseURL: top.baseURL)
                renditions.append((SelectedPlaylist(url: url.string, role: .media, bandwidth: nil, name: nil, language: nil), media))
            case .master:
                let master = try top.playlist.master(baseURL: top.baseURL)
                let selected = item.selection.select(from: master)
                notes = item.selection.unmatched(in: master)
                guard !selected.isEmpty else { throw DownloadError.corrupted.with("the master playlist names no rendition to download") }
                // The renditions' playlists load in parallel (one round trip instead of one per rendition); results
                // and the error reported (the first rendition's that failed) follow the master's order.
                var mediaURLs: [OriginURL] = []
                for choice in selected {
                    do { mediaURLs.append(try OriginURL(choice.url)) } catch {
                        throw DownloadError.corrupted.with("\(choice.url): \(error)")
                    }
                }
                let loaded = await loadPlaylists(mediaURLs, item: item, storing: storing)
                for (choice, (mediaURL, result)) in zip(selected, zip(mediaURLs, loaded)) {
                    let playlist = try result.get()
                    guard playlist.playlist.kind == .media else {
                        throw DownloadError.corrupted.with("\(choice.url) is not a media playlist")
                    }
                    renditions.append((choice, try playlist.playlist.media(baseURL: playlist.baseURL, imports: master.variables)))
                    playlistURLs.append(mediaURL)
                    tolerated += Self.toleranceNotes(playlist.playlist, url: mediaURL)
                }
            }
            if let live = renditions.first(where: { $0.1.isLive }) {
                throw DownloadError.unsupported.with(
                    "\(live.0.url) is a live playlist (no EXT-X-ENDLIST); live recording is not supported yet")
            }
            var plan = try DownloadPlan.make(
                playlists: playlistURLs, renditions: renditions, seconds: item.precacheSeconds,
                volatileParameters: configuration.volatileQueryParameters, slicing: SliceLayout(sliceSize: configuration.sliceSize))
            plan.notes = notes + tolerated
            // The poster is stored with the item (first, so a page can show it while the rest downloads).
            if let poster = item.posterURL, let posterURL = try? OriginURL(poster) {
                let key = CacheKey(posterURL, volatileParameters: configuration.volatileQueryParameters)
                if !plan.resources.contains(where: { $0.key == key }) {
                    var resource = PlannedResource(url: posterURL, key: key, kind: .other)
                    resource.isPoster = true
                    plan.media.insert(resource, at: 0)
                }
            }
            return plan
        } catch {
            throw DownloadError.from(error)
        }
    }

    /// One note per tolerance of a playlist read as players read it (the first line of each kind).
    static func toleranceNotes(_ playlist: Playlist, url: OriginURL) -> [String] {
        playlist.warnings.map { "\(url.redacted) departs from RFC 8216, read as players read it: \($0)" }
    }

    /// Loads media playlists in parallel; the results are in the order of `urls`.
    private func loadPlaylists(_ urls: [OriginURL], item: DownloadItem, storing: Bool) async
        -> [Result<(playlist: Playlist, baseURL: String), any Error>]
    {
        await withTaskGroup(of: IndexedPlaylist.self) { group in
            for (position, url) in urls.enumerated() {
                group.addTask {
                    do {
                        let loaded = try await self.loadPlaylist(url, item: item, isMaster: false, storing: storing)
                        return IndexedPlaylist(position: position, result: .success(loaded))
                    } catch {
                        return IndexedPlaylist(position: position, result: .failure(error))
                    }
                }
            }
            var results = [Result<(playlist: Playlist, baseURL: String), any Error>](
                repeating: .failure(CancellationError()), count: urls.count)
            for await loaded in group { results[loaded.position] = loaded.result }
            return results
        }
    }

    private struct IndexedPlaylist: Sendable {
        var position: Int
        var result: Result<(playlist: Playlist, baseURL: String), any Error>
    }

    /// A playlist: the stored raw copy when there is one (a resumed item reads what it started with), else the
    /// origin's, parsed before it is stored so an invalid playlist is never cached.
    private func loadPlaylist(_ url: OriginURL, item: DownloadItem, isMaster: Bool, storing: Bool) async throws
        -> (playlist: Playlist, baseURL: String)
    {
        let key = CacheKey(url, volatileParameters: configuration.volatileQueryParameters)
        let options = ParseOptions(maxBytes: configuration.maxPlaylistBytes, tolerant: !configuration.strictPlaylists)
        let maxBytes = configuration.maxPlaylistBytes
        // Playlists may come gzipped (the client decodes them); the item's own headers come after and win.
        let headers = [OriginClient.acceptCompressed] + item.headers.map { ($0.name, $0.value) }
        if let cached = store.lookup(key), cached.kind == .playlist, let data = FileManager.default.contents(atPath: cached.path),
            let playlist = try? Playlist(bytes: [UInt8](data), options: options), !playlist.isLiveMedia
        {
            // Stored after a redirect: relative URIs resolve against the URL that answered then.
            return (playlist, cached.location ?? url.string)
        }
        let through = throughServer(of: item)
        let requested = requestURL(url, for: item)
        let response = try await withRetries(url, isMaster: isMaster) {
            try await self.origin.fetch(requested, headers: headers, maxBytes: maxBytes)
        }
        volume.add(response.body.readableBytes)
        let bytes = try Self.originForm(of: [UInt8](response.body.readableBytesView), url: url, through: through, options: options)
        let playlist: Playlist
        do {
            playlist = try Playlist(bytes: bytes, options: options)
        } catch {
            throw DownloadError.corrupted.with("\(url) is not a valid playlist: \(error)")
        }
        // Through a balancer, the playlist is the origin's at `url` (read back as written there).
        let answered = through == nil ? response.head.url : url
        // A live playlist is never stored: a copy would go stale, and the proxy would serve it as a hit (the item is
        // refused as `unsupported` once the plan sees it is live).
        if storing && !playlist.isLiveMedia {
            let locked = item.locked
            let redirected = CacheKey(answered, volatileParameters: configuration.volatileQueryParameters) != key
            try await threadPool.runIfActive { [store] in
                let writer = try store.makeWriter(for: key, expectedLength: Int64(bytes.count))
                do {
                    try writer.write(bytes)
                    _ = try writer.finish(
                        contentType: "application/vnd.apple.mpegurl", kind: .playlist, locked: locked,
                        location: redirected ? answered.string : nil)
                } catch {
                    writer.abort()
                    throw error
                }
            }
        }
        // Relative URIs resolve against the URL that answered (after redirects).
        return (playlist, answered.string)
    }
}

/// Bytes fetched from origins during one run, for the rate shown on the progress line.
final class RunCounter: Sendable {
    private let state = NIOLockedValueBox((bytes: Int64(0), start: ContinuousClock.now, itemRecorded: Int64(0)))
    /// What paces this run's transfers: the item's cap within the process's, or the process's.
    let limiter: RateLimiter?
    private let volume: VolumeMeter?
    /// Transfers at a time, and how often they were narrowed (``pushedBack(generation:)``).
    private let width: NIOLockedValueBox<(transfers: Int, generation: Int)>

    init(limiter: RateLimiter? = nil, volume: VolumeMeter? = nil, transfers: Int = 1) {
        self.limiter = limiter
        self.volume = volume
        width = NIOLockedValueBox((max(1, transfers), 0))
    }

    /// Transfers this run runs at once: `downloads.resourcesPerItem`, halved each time the origin pushed back.
    var transfers: Int { width.withLockedValue { $0.transfers } }

    /// Taken when a transfer starts; a push-back from it narrows the run only if no other narrowed it since.
    var generation: Int { width.withLockedValue { $0.generation } }

    /// The origin answered 429 or 503 to a transfer started at `generation`: the run goes on with half as many
    /// transfers at a time (at least one), for the rest of the run — once per burst, not once per transfer that was
    /// already under way when the origin began to refuse. Returns the new number if it narrowed.
    func pushedBack(generation: Int) -> Int? {
        width.withLockedValue { width -> Int? in
            guard width.generation == generation, width.transfers > 1 else { return nil }
            width.transfers = max(1, width.transfers / 2)
            width.generation += 1
            return width.transfers
        }
    }

    func add(_ bytes: Int) {
        state.withLockedValue { $0.bytes += Int64(bytes) }
        volume?.add(bytes)
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

    /// Bytes per second since the run started.
    var rate: Double {
        state.withLockedValue { state in
            let (seconds, attoseconds) = (ContinuousClock.now - state.start).components
            let elapsed = Double(seconds) + Double(attoseconds) / 1e18
            return elapsed > 0.05 ? Double(state.bytes) / elapsed : 0
        }
    }
}

extension Downloader {
    /// The hlscache (a fleet's balancer, `scheme://authority`) `item`'s resources are requested through: its own
    /// (`fetch --through`, the API's `through`), else the process's; `nil`: straight from the origins.
    func throughServer(of item: DownloadItem) -> String? {
        item.through ?? configuration.throughServer
    }

    /// Where the request for `url` goes: the origin URL itself, or with ``throughServer(of:)`` its proxy path on
    /// that server (`http://BALANCER/https/cdn…/seg.ts`), so the resource lands on the node that will serve it.
    func requestURL(_ url: OriginURL, for item: DownloadItem) -> OriginURL {
        guard let server = throughServer(of: item) else { return url }
        return (try? OriginURL(server + url.proxyPath)) ?? url
    }

    /// Where a key is fetched from through ``throughServer(of:)``: the server's `/keys/{id}/…`, where the node
    /// stores it sealed and serves it as a key (through its proxy path it would be a key-sized body, never stored);
    /// `nil` without one (the key store fetches from the origin).
    func keyRequestURL(_ url: OriginURL, id: KeyID, for item: DownloadItem) -> OriginURL? {
        guard let server = throughServer(of: item) else { return nil }
        return try? OriginURL(server + id.path(for: url))
    }

    /// A playlist as its origin wrote it: with `--through`, the balancer's hlscache served it rewritten, and its URIs
    /// point back at that server; the origin's own URLs are what the plan and the store need.
    static func originForm(of bytes: [UInt8], url: OriginURL, through server: String?, options: ParseOptions) throws(DownloadError)
        -> [UInt8]
    {
        guard let server else { return bytes }
        do {
            return try Playlist(bytes: bytes, options: options).rewrite(
                baseURL: server + url.proxyPath, keepingUnresolved: true, using: ServedPathRewriter(server: server))
        } catch {
            throw DownloadError.corrupted.with("\(url) through \(server) is not a valid playlist: \(error)")
        }
    }
}
