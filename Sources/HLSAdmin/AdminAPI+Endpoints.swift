import Foundation
import HLSCacheCore
import HLSDownloader
import HLSKeys

/// The endpoints' work, on the thread pool (SQLite, the cache index).
extension AdminAPI {
    func showItem(_ id: String) throws -> Reply {
        try items.recoverInterrupted()
        let item = try items.require(id)
        var object = try json(item, consumption: try items.consumption(id))
        let resources = try items.resources(id)
        object["resources"] = resources.count
        object["resourcesDone"] = resources.count { $0.done }
        object["renditionsStored"] = try downloader.renditionStorage(of: id).map(AdminJSON.storage)
        return Reply(status: .ok, json: AdminJSON.string(object))
    }

    func createItem(_ request: ItemRequest) throws -> Reply {
        var item = request.item
        if !request.start { item.state = .ready }
        // A new item only: resuming an existing one is POST /items/{id}/resume (409 tells the client it exists).
        if try items.item(item.id) != nil { throw AdminError.conflict("an item with id \(item.id) already exists") }
        // Announced before the insert: the scheduler may claim the item the moment it is stored, and subscribers
        // must see `queued` before `downloading`.
        hub.itemChanged(item)
        do {
            try items.insert(item)
        } catch {
            hub.itemRemoved(item.id)
            throw error
        }
        if request.start {
            wake()
        } else if !request.posterOnly {
            // Loads its playlists, renditions and estimate in the background; it stays `ready` until resumed.
            let downloader = self.downloader
            let id = item.id
            Task { _ = try? await downloader.prepare(id) }
        }
        return Reply(
            status: .created, json: AdminJSON.string(try json(item, consumption: nil)),
            headers: [("Location", "/api/v1/items/\(item.id)")])
    }

    /// `POST /items` with `"posterOnly": true`: the item created `ready`, then its poster stored (the answer waits for
    /// it); a poster the origin refuses leaves the item with its `posterError` (still `201`: the item exists).
    func createPosterOnly(_ request: ItemRequest) async throws -> Reply {
        let id = request.item.id
        _ = try await threadPool.runIfActive { try self.createItem(request) }
        let item: DownloadItem
        do {
            item = try await downloader.storePoster(of: id)
        } catch {
            item = try items.require(id)
        }
        return Reply(
            status: .created, json: AdminJSON.string(try json(item, consumption: nil)), headers: [("Location", "/api/v1/items/\(id)")])
    }

    /// `PATCH /items/{id}`: expiry (relative or absolute; the item's keys follow it) and lock.
    func changeItem(_ id: String, _ body: [UInt8]) throws -> Reply {
        let changes = try ItemPatchRequest.parse(body)
        let readAt = ContinuousClock.now
        let item = try downloader.change(id, changes)
        hub.itemChanged(item, readAt: readAt)
        return Reply(status: .ok, json: AdminJSON.string(try json(item, consumption: try items.consumption(id))))
    }

    func removeItem(_ id: String, keepMetadata: Bool) throws -> Reply {
        try downloader.remove(id, keepMetadata: keepMetadata)
        if keepMetadata {
            let item = try items.require(id)
            return Reply(status: .ok, json: AdminJSON.string(try json(item, consumption: try items.consumption(id))))
        }
        hub.itemRemoved(id)
        return Reply(status: .noContent, json: "")
    }

    func act(_ action: String, on id: String) throws -> Reply {
        let item: DownloadItem
        let readAt = ContinuousClock.now
        switch action {
        case "pause":
            item = try downloader.pause(id)
        case "resume":
            item = try downloader.resume(id)
            // Announced before the scheduler is woken: subscribers see `queued` before `downloading`.
            hub.itemChanged(item, readAt: readAt)
            wake()
        case "verify":
            item = try downloader.verify(id)
        case "lock":
            item = try downloader.setLocked(id, true)
        default:
            item = try downloader.setLocked(id, false)
        }
        hub.itemChanged(item, readAt: readAt)
        return Reply(status: .ok, json: AdminJSON.string(try json(item, consumption: try items.consumption(id))))
    }

    /// The item's playback playlist (only its renditions), or its offline form (media playlists ending after the
    /// stored part, served by ``offlineMediaPlaylist(_:rendition:)``).
    func playbackPlaylist(_ id: String, offline: Bool) throws -> Reply {
        let media: ((Int) -> String)? = offline ? { DownloadItem.offlineMediaPath(of: id, rendition: $0) } : nil
        let bytes = try downloader.playbackPlaylist(id, offlineMedia: media)
        return Reply(status: .ok, json: String(decoding: bytes, as: UTF8.self), contentType: "application/vnd.apple.mpegurl")
    }

    func offlineMediaPlaylist(_ id: String, rendition: Int) throws -> Reply {
        let bytes = try downloader.offlineMediaPlaylist(id, rendition: rendition)
        return Reply(status: .ok, json: String(decoding: bytes, as: UTF8.self), contentType: "application/vnd.apple.mpegurl")
    }

    /// An item as the API shows it, with whether it plays offline and until when.
    func json(_ item: DownloadItem, consumption: ItemConsumption?) throws -> [String: Any] {
        AdminJSON.item(item, consumption: consumption, offline: try downloader.offlineStatus(of: item))
    }

    func listKeys() throws -> Reply {
        let records = try keys.list()
        let list = records.map { record -> [String: Any] in
            var object: [String: Any] = [
                "id": record.id.value, "host": record.host, "state": keys.state(of: record).rawValue,
                "registeredAt": AdminJSON.iso(record.registeredAt),
            ]
            if let expires = record.expiresAt { object["expiresAt"] = AdminJSON.iso(expires) }
            if let fetched = record.fetchedAt { object["fetchedAt"] = AdminJSON.iso(fetched) }
            if let error = record.lastError { object["lastError"] = error }
            return object
        }
        return Reply(status: .ok, json: AdminJSON.string(["keys": list]))
    }

    /// Today's download volume and the policies that hold downloads back (`GET /status`).
    func downloadsStatus() -> [String: Any] {
        let policies = downloader.configuration.policies
        var object: [String: Any] = ["today": downloader.volumeToday()]
        if let limit = policies.dailyBytes { object["dailyLimit"] = limit }
        if let window = policies.window { object["window"] = window.description }
        if let rate = downloader.configuration.bytesPerSecond { object["rateLimit"] = rate }
        if let rate = policies.itemBytesPerSecond { object["itemRate"] = rate }
        if let size = policies.maxItemBytes { object["maxItemSize"] = size }
        return object
    }

    func status() throws -> Reply {
        let usage = try store.usage()
        let (hits, misses) = recorder.hitsAndMisses
        let byState = try items.countsByState().filter { $0.value > 0 }
        let object: [String: Any] = [
            "version": HLSCacheVersion.current,
            "startedAt": AdminJSON.iso(startedAt),
            "cache": ["bytes": usage.bytes, "objects": usage.count, "maxBytes": store.maxBytes] as [String: Any],
            "requests": [
                "hits": hits, "misses": misses,
                "hitRatio": hits + misses > 0 ? (Double(hits) / Double(hits + misses) * 1000).rounded() / 1000 : 0,
            ] as [String: Any],
            "items": byState,
            "eventSubscribers": hub.subscriberCount,
            "downloads": downloadsStatus(),
            "configuration": configurationStatus.json,
        ]
        return Reply(status: .ok, json: AdminJSON.string(object))
    }
}
