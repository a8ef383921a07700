import Foundation
import HLSDownloader

/// `POST /items` with a JSON array: many items in one call (the PCD's `downloadItemsWithContentIds:`).
extension AdminAPI {
    /// The most entries one array may hold.
    package static let maxBulkItems = 1000

    /// One entry of an array body, read: the item to create, or why it is refused.
    enum BulkEntry {
        case item(ItemRequest)
        case refused(id: String?, AdminError)
    }

    /// Each entry of `list` read as `POST /items` reads one body; a bad entry is refused alone.
    static func bulkEntries(_ list: [Any], now: Date = Date(), defaultSeconds: Int = 0) throws(AdminError) -> [BulkEntry] {
        guard !list.isEmpty, list.count <= maxBulkItems else {
            throw .badRequest("an array of 1…\(maxBulkItems) items is expected")
        }
        return list.map { entry -> BulkEntry in
            guard let object = entry as? [String: Any],
                let data = try? JSONSerialization.data(withJSONObject: object)
            else { return .refused(id: nil, .badRequest("an entry must be a JSON object")) }
            let id = object["id"] as? String
            for field in ["dryRun", "posterOnly"] where object[field] != nil {
                return .refused(id: id, .badRequest("\"\(field)\": one item at a time, not in an array"))
            }
            do throws(AdminError) {
                return .item(try ItemRequest.parse(object: object, data: data, now: now, defaultSeconds: defaultSeconds))
            } catch {
                return .refused(id: id, error)
            }
        }
    }

    /// Records every acceptable entry whose id is free, in one transaction; answers `200` with a result per entry,
    /// in the order given: `created` (with the item), `exists` (its id is taken or, without an id, an item of the same
    /// URL is stored: `id` names that item) or `refused` (with the reason).
    func createItems(_ entries: [BulkEntry]) throws -> Reply {
        var accepted: [(item: DownloadItem, matchURL: Bool)] = []
        for case .item(let request) in entries {
            var item = request.item
            if !request.start { item.state = .ready }
            accepted.append((item, !request.idGiven))
        }
        // Announced inside the transaction (as POST /items announces before its insert): subscribers see `queued`
        // before the scheduler's `downloading`.
        let hub = self.hub
        let existing: [String?]
        do {
            existing = try items.insertNew(accepted) { hub.itemChanged($0) }
        } catch {
            for entry in accepted { hub.itemRemoved(entry.item.id) }
            throw error
        }
        var results: [[String: Any]] = []
        var counts = ["created": 0, "exists": 0, "refused": 0]
        var next = 0
        var started = false
        for (index, entry) in entries.enumerated() {
            var result: [String: Any] = ["index": index]
            switch entry {
            case .refused(let id, let error):
                if let id { result["id"] = id }
                result["result"] = "refused"
                result["error"] = error.code
                result["message"] = error.message
            case .item(let request):
                let item = accepted[next].item
                let found = existing[next]
                next += 1
                result["id"] = found ?? item.id
                if found == nil {
                    result["result"] = "created"
                    result["item"] = try json(item, consumption: nil)
                    if request.start {
                        started = true
                    } else {
                        let downloader = self.downloader
                        let id = item.id
                        Task { _ = try? await downloader.prepare(id) }
                    }
                } else {
                    result["result"] = "exists"
                }
            }
            counts[result["result"] as! String, default: 0] += 1
            results.append(result)
        }
        if started { wake() }
        var object: [String: Any] = ["results": results]
        for (name, count) in counts { object[name] = count }
        return Reply(status: .ok, json: AdminJSON.string(object))
    }
}
