import Foundation
import GRDB

/// Playback records (table `item_consumption`, migration `v2-consumption`): the admin layer of `serve` writes them
/// when the proxy serves an item's segments; `show` and the API read them. Removed with the item.
extension ItemStore {
    /// Records that `start..<end` seconds of item `id` were served at `at` (merging with what was served before).
    /// Unknown items are ignored (an item removed while its segment was being served).
    package func recordPlayback(_ id: String, start: Double, end: Double, at: Date = Date()) throws(DownloadError) {
        try write { db in
            guard try Row.fetchOne(db, sql: "SELECT 1 FROM items WHERE id = ?", arguments: [id]) != nil else { return }
            var record = try Self.fetchConsumption(db, id: id) ?? ItemConsumption(lastPlayedAt: at)
            record.lastPlayedAt = max(record.lastPlayedAt, at)
            record.add(start: start, end: end)
            let served = String(decoding: try JSONEncoder().encode(record.served), as: UTF8.self)
            try db.execute(
                sql: "INSERT OR REPLACE INTO item_consumption (item_id, last_played_at, served) VALUES (?, ?, ?)",
                arguments: [id, record.lastPlayedAt.timeIntervalSince1970, served])
        }
    }

    /// The playback record of item `id`, or `nil` when it was never played through the proxy.
    package func consumption(_ id: String) throws(DownloadError) -> ItemConsumption? {
        try read { db in try Self.fetchConsumption(db, id: id) }
    }

    /// Every playback record, by item id.
    package func consumptions() throws(DownloadError) -> [String: ItemConsumption] {
        try read { db in
            var all: [String: ItemConsumption] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT item_id, last_played_at, served FROM item_consumption") {
                all[row["item_id"]] = try Self.decodeConsumption(row)
            }
            return all
        }
    }

    /// The playback records of the items `ids` (a listing page), by item id.
    package func consumptions(of ids: [String]) throws(DownloadError) -> [String: ItemConsumption] {
        guard !ids.isEmpty else { return [:] }
        return try read { db in
            var all: [String: ItemConsumption] = [:]
            for chunk in stride(from: 0, to: ids.count, by: 500).map({ Array(ids[$0..<min($0 + 500, ids.count)]) }) {
                let sql =
                    "SELECT item_id, last_played_at, served FROM item_consumption WHERE item_id IN (\(chunk.map { _ in "?" }.joined(separator: ", ")))"
                for row in try Row.fetchAll(db, sql: sql, arguments: StatementArguments(chunk)) {
                    all[row["item_id"]] = try Self.decodeConsumption(row)
                }
            }
            return all
        }
    }

    /// Whether any item lists any resource: when none does, nothing served can be an item's (one index read).
    package func listsAnyResource() throws(DownloadError) -> Bool {
        try read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM item_resources)") ?? false }
    }

    /// The ids of the items whose resource list contains the cache key `key` (a stored ``ItemResource/key``).
    package func items(listing key: String) throws(DownloadError) -> [String] {
        try items(listing: [key])[key] ?? []
    }

    /// For each of `keys` (stored ``ItemResource/key`` values) listed by some item, the ids of those items; keys no
    /// item lists are left out. One read, index lookups only (`item_resources_key`), in chunks of 500 keys.
    package func items(listing keys: some Collection<String>) throws(DownloadError) -> [String: [String]] {
        guard !keys.isEmpty else { return [:] }
        let all = Array(keys)
        return try read { db in
            var found: [String: [String]] = [:]
            for start in stride(from: 0, to: all.count, by: 500) {
                let chunk = all[start..<min(start + 500, all.count)]
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                let rows = try Row.fetchAll(
                    db, sql: "SELECT key, item_id FROM item_resources WHERE key IN (\(marks))", arguments: StatementArguments(Array(chunk)))
                for row in rows { found[row["key"] as String, default: []].append(row["item_id"]) }
            }
            return found
        }
    }

    private static func fetchConsumption(_ db: Database, id: String) throws -> ItemConsumption? {
        try Row.fetchOne(db, sql: "SELECT item_id, last_played_at, served FROM item_consumption WHERE item_id = ?", arguments: [id])
            .map(decodeConsumption)
    }

    private static func decodeConsumption(_ row: Row) throws -> ItemConsumption {
        let served = try JSONDecoder().decode([[Double]].self, from: Data((row["served"] as String).utf8))
        return ItemConsumption(lastPlayedAt: Date(timeIntervalSince1970: row["last_played_at"]), served: served)
    }
}
