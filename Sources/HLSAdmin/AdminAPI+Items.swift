import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSKeys

/// Listing with filters, sorting and pages; batch actions; an item's keys (docs/api.md).
extension AdminAPI {
    /// The query parameters `GET /items` reads.
    static let listParameters: Set<String> = [
        "state", "tag", "played", "url", "ids", "locked", "q", "sort", "limit", "offset", "after",
    ]
    /// The largest page.
    static let maxPageSize = 1000

    /// `GET /items?state=a,b&tag=t&played=false&url=text&sort=-createdAt&limit=50&offset=100` (or `after=CURSOR`).
    static func listQuery(_ parameters: [String: String]) throws(AdminError) -> ItemQuery {
        if let unknown = parameters.keys.sorted().first(where: { !listParameters.contains($0) }) {
            throw .badRequest("unknown parameter \(unknown) (expected \(listParameters.sorted().joined(separator: ", ")))")
        }
        var query = try filter(
            states: parameters["state"].map { Self.split($0) }, tags: parameters["tag"].map { Self.split($0) },
            played: parameters["played"], url: parameters["url"])
        if let text = parameters["ids"] {
            let ids = split(text)
            guard !ids.isEmpty, ids.count <= maxPageSize else { throw .badRequest("ids=: expected 1…\(maxPageSize) ids, comma-separated") }
            query.ids = ids
        }
        switch parameters["locked"] {
        case nil: break
        case "true", "1": query.locked = true
        case "false", "0": query.locked = false
        case let other?: throw .badRequest("locked=\(other): expected true or false")
        }
        if let text = parameters["q"], !text.isEmpty { query.text = text }
        if var sort = parameters["sort"] {
            if sort.hasPrefix("-") {
                query.descending = true
                sort.removeFirst()
            }
            guard let parsed = ItemQuery.Sort(rawValue: sort) else {
                throw .badRequest(
                    "sort=\(sort): expected one of \(ItemQuery.Sort.allCases.map(\.rawValue).joined(separator: ", ")), - first for descending"
                )
            }
            query.sort = parsed
        }
        if let text = parameters["limit"] {
            guard let limit = Int(text), (1...maxPageSize).contains(limit) else {
                throw .badRequest("limit=\(text): expected 1…\(maxPageSize)")
            }
            query.limit = limit
        }
        if let text = parameters["offset"] {
            guard let offset = Int(text), offset >= 0 else { throw .badRequest("offset=\(text): expected 0 or more") }
            query.offset = offset
        }
        if let token = parameters["after"] {
            guard parameters["offset"] == nil else { throw .badRequest("give offset or after, not both") }
            guard let cursor = ItemQuery.Cursor(token: token) else {
                throw .badRequest("after: not a cursor (give the nextCursor of a page)")
            }
            guard cursor.sort == query.sort, cursor.descending == query.descending else {
                throw .badRequest(
                    "after: a cursor of the sort \(cursor.descending ? "-" : "")\(cursor.sort.rawValue); give the same sort as its page")
            }
            query.after = cursor
        }
        return query
    }

    /// The filters shared by the listing and batch actions.
    static func filter(states: [String]?, tags: [String]?, played: String?, url: String?) throws(AdminError) -> ItemQuery {
        var query = ItemQuery()
        for state in states ?? [] {
            guard let parsed = ItemState(rawValue: state) else {
                throw .badRequest("state \(state): expected one of \(ItemState.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.states.append(parsed)
        }
        query.tags = tags ?? []
        switch played {
        case nil: break
        case "true", "1": query.played = true
        case "false", "0": query.played = false
        case let other?: throw .badRequest("played=\(other): expected true or false")
        }
        if let url, !url.isEmpty { query.urlContains = url }
        return query
    }

    static func split(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    func listItems(_ parameters: [String: String]) throws -> Reply {
        let query = try Self.listQuery(parameters)
        let page = try items.page(query)
        let (list, total) = (page.items, page.total)
        let consumptions = try items.consumptions(of: list.map(\.id))
        // The keys of the items that may play offline, read in one query rather than one per item.
        let complete = list.filter { $0.state == .cached || $0.state == .partiallyCached }.map(\.id)
        let keyResources = try items.resources(of: complete, kind: CacheObjectKind.key.rawValue)
        var object: [String: Any] = [
            "items": try list.map { item in
                AdminJSON.item(
                    item, consumption: consumptions[item.id],
                    offline: try downloader.offlineStatus(of: item, keyResources: keyResources[item.id] ?? []))
            },
            "total": total,
        ]
        if query.after == nil { object["offset"] = query.offset }
        if let limit = query.limit {
            object["limit"] = limit
            if query.after == nil, query.offset + list.count < total { object["nextOffset"] = query.offset + list.count }
            if let next = page.nextCursor { object["nextCursor"] = next.token }
        }
        return Reply(status: .ok, json: AdminJSON.string(object))
    }

    /// `GET /tags`: the tags in use, with how many items carry each.
    func listTags() throws -> Reply {
        let tags = try items.tagCounts().map { ["tag": $0.tag, "items": $0.items] as [String: Any] }
        return Reply(status: .ok, json: AdminJSON.string(["tags": tags]))
    }

    // MARK: - Batch actions

    static let batchActions = BatchAction.allCases.map(\.rawValue)
    static let batchFields: Set<String> = ["action", "ids", "filter", "keepMetadata"]
    static let batchFilterFields: Set<String> = ["state", "tag", "played", "url"]
    /// The most ids one request may name.
    static let maxBatchIDs = 10_000

    /// `POST /items/batch`: one action on several items, named by `ids` or selected by `filter`; per-item results.
    func batch(_ body: [UInt8]) throws -> Reply {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw AdminError.badRequest("the body must be a JSON object")
        }
        if let unknown = object.keys.sorted().first(where: { !Self.batchFields.contains($0) }) {
            throw AdminError.badRequest("unknown field \"\(unknown)\" (expected \(Self.batchFields.sorted().joined(separator: ", ")))")
        }
        guard let name = object["action"] as? String, let action = BatchAction(rawValue: name) else {
            throw AdminError.badRequest("\"action\": expected one of \(Self.batchActions.joined(separator: ", "))")
        }
        var keepMetadata = false
        if let value = object["keepMetadata"] {
            guard action == .delete, let flag = value as? Bool else {
                throw AdminError.badRequest("\"keepMetadata\": true or false, with \"delete\" only")
            }
            keepMetadata = flag
        }
        let ids: [String]
        if let list = object["ids"] {
            guard object["filter"] == nil else { throw AdminError.badRequest("give \"ids\" or \"filter\", one of them") }
            guard let list = list as? [String], !list.isEmpty, list.count <= Self.maxBatchIDs else {
                throw AdminError.badRequest("\"ids\": expected a list of 1…\(Self.maxBatchIDs) item ids")
            }
            var seen: Set<String> = []
            ids = list.filter { seen.insert($0).inserted }
        } else if let filter = object["filter"] {
            ids = try items.ids(try Self.batchFilter(filter))
        } else {
            throw AdminError.badRequest("give \"ids\" or \"filter\", one of them")
        }
        var results: [[String: Any]] = []
        var succeeded = 0
        var resumed = false
        for id in ids {
            do throws(DownloadError) {
                let readAt = ContinuousClock.now
                var result: [String: Any] = ["id": id, "ok": true]
                if let item = try downloader.act(action, on: id, keepMetadata: keepMetadata) {
                    hub.itemChanged(item, readAt: readAt)
                    result["state"] = item.state.rawValue
                } else {
                    hub.itemRemoved(id)
                }
                if action == .resume { resumed = true }
                succeeded += 1
                results.append(result)
            } catch {
                let mapped = Self.map(error)
                results.append(["id": id, "ok": false, "error": mapped.code, "message": mapped.message])
            }
        }
        if resumed { wake() }
        return Reply(
            status: .ok,
            json: AdminJSON.string([
                "action": action.rawValue, "results": results, "succeeded": succeeded, "failed": results.count - succeeded,
            ]))
    }

    /// The `filter` of a batch request: the listing's filters as JSON.
    static func batchFilter(_ value: Any) throws -> ItemQuery {
        guard let filter = value as? [String: Any] else { throw AdminError.badRequest("\"filter\": expected an object") }
        if let unknown = filter.keys.sorted().first(where: { !batchFilterFields.contains($0) }) {
            throw AdminError.badRequest(
                "unknown filter field \"\(unknown)\" (expected \(batchFilterFields.sorted().joined(separator: ", ")))")
        }
        var lists: [String: [String]] = [:]
        for name in ["state", "tag"] {
            guard let value = filter[name] else { continue }
            if let text = value as? String {
                lists[name] = split(text)
            } else if let list = value as? [String] {
                lists[name] = list
            } else {
                throw AdminError.badRequest("\"filter.\(name)\": expected a string or a list of strings")
            }
        }
        var played: String?
        if let value = filter["played"] {
            guard let flag = value as? Bool else { throw AdminError.badRequest("\"filter.played\": expected true or false") }
            played = flag ? "true" : "false"
        }
        var url: String?
        if let value = filter["url"] {
            guard let text = value as? String else { throw AdminError.badRequest("\"filter.url\": expected a string") }
            url = text
        }
        return try Self.filter(states: lists["state"], tags: lists["tag"], played: played, url: url)
    }

    // MARK: - An item's keys

    /// `GET /items/{id}/keys`: the item's AES keys and where each stands (never the bytes).
    func itemKeys(_ id: String) throws -> Reply {
        _ = try items.require(id)
        let statuses = try downloader.keyStatus(of: id)
        return Reply(status: .ok, json: AdminJSON.string(["id": id, "keys": statuses.map(AdminJSON.key)]))
    }

    /// `POST /items/{id}/keys/renew`: fetches each of the item's keys from its origin again now (`hlscache keys renew`).
    func renewItemKeys(_ id: String) async throws -> Reply {
        _ = try items.require(id)
        var results: [[String: Any]] = []
        for status in try downloader.keyStatus(of: id) {
            guard let keyID = KeyID(status.id) else { continue }
            do throws(KeyError) {
                let record = try await keys.renew(keyID)
                var result = AdminJSON.key(
                    ItemKeyStatus(id: record.id.value, host: record.host, state: keys.state(of: record), expiresAt: record.expiresAt))
                result["renewed"] = true
                results.append(result)
            } catch {
                var result = AdminJSON.key(status)
                result["renewed"] = false
                result["error"] = error.code
                result["message"] = error.message
                results.append(result)
            }
        }
        return Reply(status: .ok, json: AdminJSON.string(["id": id, "keys": results]))
    }

    /// `POST /keys/{id}/renew`: one key, as `hlscache keys renew ID`.
    func renewKey(_ id: String) async throws -> Reply {
        guard let keyID = KeyID(id) else { throw AdminError.notFound("no key \(id)") }
        let record: KeyRecord
        do throws(KeyError) {
            record = try await keys.renew(keyID)
        } catch {
            throw error == .notFound ? AdminError.notFound(error.message) : AdminError.upstream(error.code, error.message)
        }
        return Reply(status: .ok, json: AdminJSON.string(Self.keyObject(record, keys: keys)))
    }

    static func keyObject(_ record: KeyRecord, keys: KeyService) -> [String: Any] {
        var object: [String: Any] = [
            "id": record.id.value, "host": record.host, "state": keys.state(of: record).rawValue,
            "registeredAt": AdminJSON.iso(record.registeredAt),
        ]
        if let expires = record.expiresAt { object["expiresAt"] = AdminJSON.iso(expires) }
        if let fetched = record.fetchedAt { object["fetchedAt"] = AdminJSON.iso(fetched) }
        if let error = record.lastError { object["lastError"] = error }
        return object
    }

    // MARK: - Dry run

    /// `POST /items` with `"dryRun": true`: the estimate, nothing recorded.
    func dryRun(_ request: ItemRequest) async throws -> Reply {
        let (plan, refusal) = try await downloader.dryRun(request.item)
        return Reply(status: .ok, json: AdminJSON.string(AdminJSON.plan(plan, item: request.item, refusal: refusal)))
    }
}
