import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSKeys

/// What `hlscache set` and `PATCH /api/v1/items/{id}` change of an item (nil: unchanged).
package struct ItemChanges: Sendable, Hashable {
    /// The new expiry: `.some(nil)` never expires.
    package var expiresAt: Date??
    /// Lock or unlock its objects.
    package var locked: Bool?
    /// Its own bandwidth cap, bytes per second (`.some(nil)`: none); from its next run.
    package var rateLimit: Int64??
    /// Its own maximum size in bytes (`.some(nil)`: `downloads.maxItemSize`).
    package var maxBytes: Int64??
    /// Its own download hours (`.some(nil)`: `downloads.window`).
    package var downloadWindow: DownloadWindow??
    /// Its own daily download volume in bytes (`.some(nil)`: none, only `downloads.dailyLimit`).
    package var dailyBytes: Int64??
    /// Its title (`.some(nil)`: none).
    package var title: String??
    /// Its tags, all of them (replacing the old ones).
    package var tags: [String]?
    /// Its poster URL (`.some(nil)`: none); stored at its next run.
    package var posterURL: String??
    /// The caller's JSON object as compact text (`.some(nil)`: none).
    package var metadata: String??

    package init(expiresAt: Date?? = nil, locked: Bool? = nil, rateLimit: Int64?? = nil) {
        self.expiresAt = expiresAt
        self.locked = locked
        self.rateLimit = rateLimit
    }

    /// Whether nothing is asked for.
    package var isEmpty: Bool {
        expiresAt == nil && locked == nil && rateLimit == nil && maxBytes == nil && downloadWindow == nil && dailyBytes == nil
            && title == nil
            && tags == nil && posterURL == nil && metadata == nil
    }

    /// Whether only fields that a `deleted` or `expired` item may still change are asked for (its metadata).
    var isMetadataOnly: Bool {
        expiresAt == nil && locked == nil && rateLimit == nil && maxBytes == nil && downloadWindow == nil && dailyBytes == nil
    }
}

extension Downloader {
    /// Loads a `ready` item (created without starting): reads and stores its playlists, chooses its renditions and
    /// records them, its resources and the estimate — what a run does first — and leaves it `ready` until `resume`.
    ///
    /// - Throws: what reading the playlists threw; the item is then `failed` with that code, or, when the origin was
    ///   unavailable, stays `ready` with the error as its reason. ``DownloadError/invalidState`` when it is not `ready`.
    @discardableResult
    package func prepare(_ id: String) async throws(DownloadError) -> DownloadItem {
        let item = try items.require(id)
        guard item.state == .ready else { throw DownloadError.invalidState.with("item \(id) is \(item.state.rawValue), not ready") }
        let plan: DownloadPlan
        do {
            plan = try await makePlan(for: item, storing: true)
        } catch {
            if error.isTransient {
                let waiting = try items.update(id) { stored in
                    stored.errorCode = error.code
                    stored.errorMessage = error.message
                }
                emitState(waiting)
            } else {
                _ = try? transition(id, .fail(code: error.code)) { $0.errorMessage = error.message }
            }
            throw error
        }
        do {
            try checkSize(plan, for: item)
        } catch {
            _ = try? transition(id, .fail(code: error.code)) { $0.errorMessage = error.message }
            throw error
        }
        try items.setResources(
            id, plan.resources.map { ItemResource(key: $0.key.value, url: $0.url.string, kind: $0.kind.rawValue, size: $0.knownLength) })
        let totals = try items.resourceTotals(id)
        let estimator = Self.estimator(estimate: plan.estimatedBytes, segments: plan.segmentCount)
        let loaded = try items.update(id) { stored in
            stored.renditions = plan.renditions.map(\.selected.url)
            stored.segmentsTotal = plan.segmentCount
            stored.bytesDone = totals.bytesDone
            stored.segmentsDone = totals.segmentsDone
            stored.bytesTotal = max(totals.bytesDone, estimator(totals))
            stored.errorCode = nil
            stored.errorMessage = nil
        }
        emit(.planned(id: id, resources: plan.resources.count, segments: plan.segmentCount, estimatedBytes: plan.estimatedBytes))
        emit(
            .progress(
                id: id,
                progress: DownloadProgress(
                    bytesDone: loaded.bytesDone, bytesTotal: loaded.bytesTotal, segmentsDone: loaded.segmentsDone,
                    segmentsTotal: loaded.segmentsTotal, bytesPerSecond: nil)))
        for note in plan.notes { emit(.note(id: id, message: note)) }
        return loaded
    }

    /// Changes an item after its creation (a rental extended, an absolute expiry, a lock, its own bandwidth cap,
    /// which a running download takes up at its next run): the expiry is the
    /// item's and its keys' (the key store serves each key until the latest expiry of the live items holding it,
    /// recomputed here); the lock goes to its stored objects as with ``setLocked(_:_:)``.
    ///
    /// An expiry already past is applied by the next expiry sweep (`serve`'s poll, the next command).
    /// - Throws: ``DownloadError/invalidState`` for a `deleted` or `expired` item, ``DownloadError/unknownItem``.
    @discardableResult
    package func change(_ id: String, _ changes: ItemChanges) throws(DownloadError) -> DownloadItem {
        let current = try items.require(id)
        if (current.state == .deleted || current.state == .expired) && !changes.isMetadataOnly {
            throw DownloadError.invalidState.with("cannot change the expiry, lock or policies of an item that is \(current.state.rawValue)")
        }
        var item = current
        if changes.maxBytes != nil || changes.downloadWindow != nil || changes.dailyBytes != nil || changes.title != nil
            || changes.tags != nil || changes.posterURL != nil
            || changes.metadata != nil
        {
            item = try items.update(id) { item in
                if let value = changes.maxBytes { item.maxBytes = value }
                if let value = changes.downloadWindow { item.downloadWindow = value }
                if let value = changes.dailyBytes { item.dailyBytes = value }
                if let value = changes.title { item.title = value }
                if let value = changes.tags { item.tags = value }
                if let value = changes.posterURL, value != item.posterURL {
                    item.posterURL = value
                    item.posterError = nil
                }
                if let value = changes.metadata { item.metadata = value }
            }
        }
        if let expiry = changes.expiresAt {
            item = try items.update(id) { $0.expiresAt = expiry }
            try extendKeys(of: id, to: expiry)
        }
        if let rate = changes.rateLimit {
            item = try items.update(id) { $0.rateLimit = rate }
        }
        if let locked = changes.locked, locked != current.locked {
            item = try setLocked(id, locked)
        }
        return item
    }

    /// Registers the item's keys again with the latest expiry of the live items holding each (this one's `expiry`
    /// included), so a key is served as long as the item now lives, and no longer than every holder does.
    private func extendKeys(of id: String, to expiry: Date?) throws(DownloadError) {
        for resource in try items.resources(id) where resource.kind == CacheObjectKind.key.rawValue {
            guard let url = try? OriginURL(resource.url) else { continue }
            let holders = try items.expiries(ofItemsListing: resource.key, except: id) + [expiry]
            do throws(KeyError) {
                try keys.register(url, itemExpiry: Self.latest(of: holders))
            } catch {
                throw DownloadError.keyUnavailable.with("key \(url.redacted): \(error.message)")
            }
        }
    }
}
