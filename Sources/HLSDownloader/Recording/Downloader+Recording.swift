import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSPlaylist

/// Live recording (issue 44, docs/fetch.md#live): an item with a ``RecordSpec`` follows the live media playlists of
/// its renditions and stores every new segment, init section and key, each segment recorded in `item_recording` once
/// stored, until its duration or end time, the origin's `EXT-X-ENDLIST`, or a command (pause, rm, shutdown) stops
/// it. A run that starts again (resume, `serve` after a crash) continues after the last segment recorded; what left
/// the origin's window meanwhile is a gap.
extension Downloader {
    /// Runs the recording of `item` to its end; returns a plan whose ``DownloadPlan/isPartial`` says whether segments
    /// were missed.
    func record(_ item: DownloadItem, counter: RunCounter) async throws -> DownloadPlan {
        guard let spec = item.record else { throw DownloadError.invalidState.with("item \(item.id) is not a recording") }
        let (renditions, playlistURLs, notes) = try await loadRenditions(for: item, storing: true)
        let top = playlistURLs.first.map { CacheKey($0, volatileParameters: configuration.volatileQueryParameters) }
        // The multivariant playlist (stored: it does not change) is the item's; live media playlists are not stored.
        var playlists: [ItemResource] = []
        if let top, renditions.count > 0, renditions[0].0.role != .media, let url = playlistURLs.first {
            playlists.append(ItemResource(key: top.value, url: url.string, kind: CacheObjectKind.playlist.rawValue))
        }
        try items.update(item.id) { $0.renditions = renditions.map(\.0.url) }
        try items.appendResources(item.id, playlists)
        for note in notes { emit(.note(id: item.id, message: note)) }
        emit(.planned(id: item.id, resources: playlists.count, segments: 0, estimatedBytes: nil))
        let estimator = Self.estimator(estimate: nil, segments: 0)
        let progress = ProgressBatch(
            id: item.id, items: items, estimator: estimator, interval: configuration.progressWriteInterval
        ) { [self] id, counts in
            emit(
                .progress(
                    id: id,
                    progress: DownloadProgress(
                        bytesDone: counts.bytesDone, bytesTotal: counts.bytesTotal, segmentsDone: counts.segmentsDone,
                        segmentsTotal: counts.segmentsTotal, bytesPerSecond: counter.rate)))
        }
        for playlist in playlists {
            try progress.add(CacheKey(storedValue: playlist.key), size: store.lookup(CacheKey(storedValue: playlist.key))?.size ?? 0)
        }
        let ended: Bool
        do {
            ended = try await withThrowingTaskGroup(of: Bool.self) { group in
                for (index, (selected, media)) in renditions.enumerated() {
                    group.addTask {
                        try await self.recordRendition(
                            index, selected: selected, first: media, item: item, spec: spec, counter: counter, progress: progress)
                    }
                }
                var all = true
                for try await done in group { all = all && done }
                return all
            }
        } catch {
            _ = usedVolume(policies: configuration.policies, force: true)
            recordItemVolume(of: item.id, counter: counter)
            try? progress.flush()
            throw error
        }
        _ = usedVolume(policies: configuration.policies, force: true)
        recordItemVolume(of: item.id, counter: counter)
        try progress.flush()
        if ended { try items.updateRecord(item.id) { $0.ended = true } }
        let current = try items.require(item.id)
        if item.locked || current.locked {
            try store.setLocked(try items.resources(item.id).map { CacheKey(storedValue: $0.key) }, true)
        }
        return DownloadPlan(renditions: [], playlists: [], media: [], isPartial: (current.record?.gaps ?? 0) > 0)
    }

    /// Follows one rendition: stores each segment the origin lists after the last one recorded, then reloads the
    /// playlist (half a target duration after a reload that brought nothing, a target duration after one that did,
    /// RFC 8216 §6.3.4). Returns true when the recording reached its end.
    private func recordRendition(
        _ index: Int, selected: SelectedPlaylist, first: MediaPlaylist, item: DownloadItem, spec: RecordSpec, counter: RunCounter,
        progress: ProgressBatch
    ) async throws -> Bool {
        let url = try OriginURL(selected.url)
        let end = try items.recordedEnd(item.id, rendition: index)
        var lastSequence = end?.sequence
        var seconds = end?.seconds ?? 0
        var missed = 0
        var media = first
        while true {
            keepWindow(of: media)
            if spec.isDone(recorded: seconds, now: now) { return true }
            let fresh = media.segments.filter { segment in lastSequence.map { segment.mediaSequence > $0 } ?? true }
            if let last = lastSequence, let next = fresh.first, next.mediaSequence > last + 1 {
                // Left the origin's window before this run saw them (hlscache was stopped, the origin failed to answer).
                missed += Int(min(next.mediaSequence - last - 1, UInt64(Int32.max)))
            }
            if !fresh.isEmpty {
                logger.debug("item \(item.id): rendition \(index): \(fresh.count) new segment(s) from \(fresh[0].mediaSequence)")
            }
            for segment in fresh {
                try Task.checkCancellation()
                if spec.isDone(recorded: seconds, now: now) { return true }
                if try await storeRecorded(segment, of: media, selected: selected, item: item, counter: counter, progress: progress) {
                    seconds += segment.duration
                    try items.appendRecorded(
                        item.id, rendition: index, [RecordedSegment(segment, missedBefore: missed)], renditionSeconds: seconds,
                        gaps: missed > 0 && lastSequence != nil ? 1 : 0)
                    missed = 0
                    logger.debug("item \(item.id): rendition \(index): segment \(segment.mediaSequence) recorded")
                } else {
                    missed += 1
                }
                lastSequence = segment.mediaSequence
            }
            if media.hasEndList { return true }
            if spec.isDone(recorded: seconds, now: now) { return true }
            let target = Double(max(1, media.targetDuration ?? 2))
            var wait = fresh.isEmpty ? target / 2 : target
            if let until = spec.until { wait = max(0.05, min(wait, until.timeIntervalSince(now))) }
            try await Task.sleep(for: .milliseconds(Int(wait * 1000)))
            let loaded = try await loadPlaylist(url, item: item, isMaster: false, storing: false)
            guard loaded.playlist.kind == .media else { throw DownloadError.corrupted.with("\(url.redacted) is not a media playlist") }
            media = try loaded.playlist.media(baseURL: loaded.baseURL)
        }
    }

    /// A reading of the live playlist being recorded: what the cache holds of its window (a viewer stored it through
    /// the proxy, with an expiry counted from then) stays served for the window's lifetime from this reading, as the
    /// proxy's own readings keep it (`PlaylistService.learnLifetimes`). The recording reads the origin's playlist
    /// itself: without this, a copy a viewer stored expired once no viewer read the playlist through the proxy any
    /// more, though the origin still listed it and the recording, a few seconds behind the reading, was about to
    /// store it — and the recording asked the origin for it again (issue 44: `LiveRecordingTests` under a stalled test
    /// process). Only objects that have an expiry gain time; a failure to write it is logged, not fatal.
    func keepWindow(of media: MediaPlaylist) {
        guard media.isLive, media.playlistType != .event else { return }
        let volatile = configuration.volatileQueryParameters
        let keys = media.listedMediaURLs.compactMap { try? OriginURL($0) }.map { CacheKey($0, volatileParameters: volatile) }
        do {
            try store.extendExpiry(
                keys, to: Date().addingTimeInterval(media.liveWindowLifetime), minimumStep: Double(media.targetDuration ?? 10))
        } catch {
            logger.warning("live lifetimes of what \(media.segments.first?.url ?? "a recorded playlist") lists not extended: \(error)")
        }
    }

    /// Stores one live segment with its key and init section. Returns false when it could not be stored after the
    /// retries (the recording goes on and counts it missed); throws only for a stop.
    private func storeRecorded(
        _ segment: Segment, of media: MediaPlaylist, selected: SelectedPlaylist, item: DownloadItem, counter: RunCounter,
        progress: ProgressBatch
    ) async throws -> Bool {
        var one = media
        one.segments = [segment]
        let plan = try DownloadPlan.make(
            playlists: [], renditions: [(selected, one)], seconds: 0, volatileParameters: configuration.volatileQueryParameters)
        try items.appendResources(
            item.id, plan.media.map { ItemResource(key: $0.key.value, url: $0.url.string, kind: $0.kind.rawValue, size: $0.knownLength) })
        do {
            try await storeMedia(of: plan, for: item, counter: counter, progress: progress, bytesAtStart: 0)
        } catch {
            if Task.isCancelled || error is CancellationError || DownloadError.from(error) == .cancelled { throw error }
            let failure = DownloadError.from(error)
            logger.notice("item \(item.id): segment \(segment.mediaSequence) of \(selected.url) missed: \(failure)")
            emit(.note(id: item.id, message: "segment \(segment.mediaSequence) of \(selected.url) was not recorded: \(failure.message)"))
            return false
        }
        // Stored earlier by a viewer, it was kept only for the live window: the recording keeps it.
        try store.clearExpiry(plan.media.filter { $0.kind != .key }.map(\.key))
        return true
    }
}
