import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSKeys

/// Whether an item plays without the origin, and until when.
package struct OfflineStatus: Sendable, Hashable {
    /// `cached` or `partiallyCached` with every resource stored, its keys valid, not expired.
    package var playable: Bool
    /// When offline playback stops: the earliest of the item's expiry and its keys' (nil: not playable, or no limit).
    package var until: Date?

    package init(playable: Bool, until: Date?) {
        self.playable = playable
        self.until = until
    }
}

extension Downloader {
    /// After an eviction: items that listed the evicted objects stop counting them, and say so (``DownloadEvent/evicted``,
    /// and a state change when a complete item becomes `partiallyCached` or `evicted`).
    func noteEvicted(_ keys: [CacheKey]) {
        let changes: [ItemStore.StoredChange]
        do {
            changes = try items.forgetStored(keys.map(\.value))
        } catch {
            logger.warning("could not record what the cache evicted of the items: \(error)")
            return
        }
        report(changes)
    }

    private func report(_ changes: [ItemStore.StoredChange]) {
        for change in changes {
            let item = change.item
            if change.lost > 0 {
                logger.info("the cache evicted \(change.lost) resource(s) of item \(item.id); it is \(item.state.rawValue)")
                emit(
                    .evicted(
                        id: item.id, state: item.state, resources: change.lost, bytesDone: item.bytesDone, segmentsDone: item.segmentsDone))
            }
            if item.state != change.previousState { emitState(item) }
        }
    }

    /// `hlscache verify ID` (and the API's): re-checks every resource of the item against the store (and its keys
    /// against the key store) and corrects the item — what is gone no longer counts (a complete item becomes
    /// `partiallyCached` or `evicted`), what is there counts. `resume` then fetches what is missing.
    /// - Returns: the item as stored after the check.
    @discardableResult
    package func verify(_ id: String) throws(DownloadError) -> DownloadItem {
        let item = try items.require(id)
        guard item.state != .deleted && item.state != .expired else { return item }
        var gone: [String] = []
        var found: [(key: String, size: Int64)] = []
        for resource in try items.resources(id) {
            let size = storedSize(of: resource)
            if resource.done, size == nil { gone.append(resource.key) }
            if !resource.done, let size { found.append((resource.key, size)) }
        }
        // Always recounted, even with nothing found: the count of missing resources may be stale (a row an older
        // process rewrote).
        var changes: [ItemStore.StoredChange] = []
        if let change = try items.markStored(id, found) { changes.append(change) }
        changes += try items.forgetStored(gone, only: id)
        report(changes)
        return try items.require(id)
    }

    /// The size of the resource as stored now, or nil: the object in the store, or 16 for a key whose sealed copy is
    /// in the key store.
    private func storedSize(of resource: ItemResource) -> Int64? {
        if resource.kind == CacheObjectKind.key.rawValue {
            guard let url = try? OriginURL(resource.url), let record = try? keys.record(keys.id(for: url)), record.isStored else {
                return nil
            }
            return 16
        }
        return store.lookup(CacheKey(storedValue: resource.key))?.size
    }

    /// Whether the item plays offline now (`cached` or `partiallyCached`, nothing missing, not expired, every key
    /// valid) and until when (the earliest of its expiry and its keys').
    /// - Parameter keyResources: the item's key resources, when the caller read them already.
    package func offlineStatus(of item: DownloadItem, now: Date = Date(), keyResources: [ItemResource]? = nil) throws(DownloadError)
        -> OfflineStatus
    {
        guard item.state == .cached || item.state == .partiallyCached, item.missingResources == 0 else {
            return OfflineStatus(playable: false, until: nil)
        }
        if let expiry = item.expiresAt, expiry <= now { return OfflineStatus(playable: false, until: nil) }
        var until = item.expiresAt
        for key in try keyStatus(of: item.id, keyResources: keyResources) {
            guard key.state == .valid else { return OfflineStatus(playable: false, until: nil) }
            if let expiry = key.expiresAt {
                if expiry <= now { return OfflineStatus(playable: false, until: nil) }
                until = min(until ?? expiry, expiry)
            }
        }
        return OfflineStatus(playable: true, until: until)
    }
}
