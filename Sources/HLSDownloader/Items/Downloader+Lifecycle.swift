import Foundation
import HLSCacheCore
import HLSCacheStore

extension Downloader {
    /// `hlscache pause`: a running download (in any process) stops within the state poll interval.
    @discardableResult
    package func pause(_ id: String) throws(DownloadError) -> DownloadItem {
        try transition(id, .pause)
    }

    /// `hlscache resume`: a paused, interrupted, failed, cached, evicted or deleted (`rm --keep-metadata`) item goes
    /// back to `queued` (then a
    /// downloader runs it: the caller with ``run(_:)``, or a scheduler).
    @discardableResult
    package func resume(_ id: String) throws(DownloadError) -> DownloadItem {
        try items.recoverInterrupted()
        return try transition(id, .resume)
    }

    /// `hlscache rm`: stops the item, evicts its objects (those no other live item lists) and, unless
    /// `keepMetadata`, forgets it. With `keepMetadata` its poster stays (PCD `deleteThumbnail:NO`): the record shows
    /// it still.
    package func remove(_ id: String, keepMetadata: Bool) throws(DownloadError) {
        try transition(id, .delete)
        if !keepMetadata {
            try evictPoster(of: id)
            try items.purge(id)
        }
    }

    /// `hlscache lock` / `unlock`: sets the item's lock and the `locked` flag of its stored objects (an object
    /// another locked item lists stays locked).
    ///
    /// An object is locked exactly when a live (not expired or deleted) locked item lists it, so a `deleted` or
    /// `expired` item is refused: locking it would lock the objects it shares with live items, and nothing would
    /// ever unlock them (its own objects are gone).
    /// - Throws: ``DownloadError/invalidState`` for a `deleted` or `expired` item, ``DownloadError/unknownItem``.
    @discardableResult
    package func setLocked(_ id: String, _ locked: Bool) throws(DownloadError) -> DownloadItem {
        let current = try items.require(id)
        if current.state == .deleted || current.state == .expired {
            throw DownloadError.invalidState.with("cannot \(locked ? "lock" : "unlock") an item that is \(current.state.rawValue)")
        }
        let item = try items.update(id) { $0.locked = locked }
        var keys: [CacheKey] = []
        for resource in try items.resources(id) {
            if !locked, try items.isShared(resource.key, except: id, lockedOnly: true) { continue }
            keys.append(CacheKey(storedValue: resource.key))
        }
        do {
            try store.setLocked(keys, locked)
        } catch {
            throw DownloadError.from(error)
        }
        return item
    }

    /// Expires every item whose expiry has passed: state `expired`, objects evicted.
    /// - Returns: the ids expired now.
    @discardableResult
    package func expireDue(now: Date = Date()) throws(DownloadError) -> [String] {
        var expired: [String] = []
        for item in try items.expiring(at: now) {
            // A download of this item in another process notices within its poll interval and stops.
            do {
                try transition(item.id, .expire)
            } catch  where error == .unknownItem || error == .invalidState {
                continue  // removed, or deleted, since it was listed
            }
            expired.append(item.id)
        }
        return expired
    }

    /// `downloads.autoPurge` (when on): removes every expired item that is not locked, records included, as `rm`
    /// does; its objects went at expiry (or stayed as ordinary cache objects, `keepFilesOnExpiry`). A locked item
    /// stays listed as `expired` until it is removed by hand.
    /// - Returns: the ids removed.
    @discardableResult
    package func purgeExpiredUnlocked() throws(DownloadError) -> [String] {
        guard configuration.autoPurgeExpired else { return [] }
        let purged = try items.purgeExpiredUnlocked()
        if !purged.isEmpty { logger.info("auto-purge removed \(purged.count) expired item(s): \(purged.joined(separator: ", "))") }
        return purged
    }

    /// Removes the item's objects from the cache, except those another item that is not expired or deleted
    /// lists; playlists take the proxy's rewritten copies with them.
    func evictObjects(of id: String) throws(DownloadError) {
        try evict(try items.resources(id), of: id)
        // Nothing of it is stored any more: a resumed `rm --keep-metadata` item counts from zero again.
        try items.markNothingStored(id)
    }

    /// Removes `resources` of item `id` from the cache (and their keys from the key store), except those another
    /// live item lists; those are unlocked unless another live locked item lists them (item `id` may have been the
    /// one that locked them, and nothing else would unlock them: the cache would fill with locked objects).
    func evict(_ resources: [ItemResource], of id: String) throws(DownloadError) {
        var unlock: [CacheKey] = []
        for resource in resources {
            if try items.isShared(resource.key, except: id) {
                if try !items.isShared(resource.key, except: id, lockedOnly: true) { unlock.append(CacheKey(storedValue: resource.key)) }
                if resource.kind == CacheObjectKind.key.rawValue { try limitKey(resource, toItemsOtherThan: id) }
                continue
            }
            if resource.kind == CacheObjectKind.key.rawValue { forgetKey(resource) }
            var keys = [resource.key]
            if resource.kind == CacheObjectKind.playlist.rawValue {
                // The proxy keeps rewritten (and gzipped) copies of a playlist beside the raw one.
                keys += [resource.key + "#hlscache-rewritten", resource.key + "#hlscache-rewritten.gz"]
            }
            for key in keys {
                do {
                    try store.remove(CacheKey(storedValue: key))
                } catch {
                    throw DownloadError.from(error)
                }
            }
        }
        guard !unlock.isEmpty else { return }
        do {
            try store.setLocked(unlock, false)
        } catch {
            throw DownloadError.from(error)
        }
    }

    /// At expiry with ``DownloaderConfiguration/keepFilesOnExpiry``: the item's keys are purged (unless another
    /// live item lists them) and its objects unlocked (unless another locked item lists them); the files stay as
    /// ordinary cache objects.
    func releaseObjects(of id: String) throws(DownloadError) {
        var unlock: [CacheKey] = []
        for resource in try items.resources(id) {
            if resource.kind == CacheObjectKind.key.rawValue, try !items.isShared(resource.key, except: id) {
                forgetKey(resource)
            }
            if try !items.isShared(resource.key, except: id, lockedOnly: true) { unlock.append(CacheKey(storedValue: resource.key)) }
        }
        do {
            try store.setLocked(unlock, false)
        } catch {
            throw DownloadError.from(error)
        }
    }

    // MARK: - Transitions

    /// The one way the downloader changes an item's state: applies `event` in the items table (with `change`, in the
    /// same transaction), runs the action the state machine returns and announces the new state.
    /// - Throws: ``DownloadError/unknownItem``, ``DownloadError/invalidState`` (nothing changed), or what evicting the
    ///   item's objects threw (the new state is stored).
    @discardableResult
    func transition(
        _ id: String, _ event: ItemStateMachine.Event, change: @Sendable (inout DownloadItem) -> Void = { _ in }
    ) throws(DownloadError) -> DownloadItem {
        let (item, action) = try items.apply(event, to: id, change: change)
        switch action {
        case .persist:
            break
        case .startDownload:
            // Only a run starts an item (``ItemStore/claim(_:)``, not this function): the run is the download.
            break
        case .stopDownload:
            stopRun(of: id)
        case .stopAndEvict:
            stopRun(of: id)
            if case .expire = event, configuration.keepFilesOnExpiry {
                try releaseObjects(of: id)
            } else if case .delete = event {
                try evictAllButPoster(of: id)
            } else {
                try evictObjects(of: id)
            }
        }
        emitState(item)
        return item
    }

    /// Cancels this process's run of the item, if any; the run then settles on the state already stored.
    private func stopRun(of id: String) {
        runningTask(id)?.cancel()
    }
}
