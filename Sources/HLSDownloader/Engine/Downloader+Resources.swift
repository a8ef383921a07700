import Foundation
import HLSCacheStore
import NIOCore

extension Downloader {
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
    func storeMedia(
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
                    } else if item.record != nil, let shared = try await self.fetchShared(resource, for: item) {
                        // A recording's segment stored by this server's proxy (Recording/Downloader+SharedFetch.swift).
                        if !resource.encryptions.isEmpty { try await self.verify(resource) }
                        size = shared
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
}
