import Foundation
import GRDB

extension ItemStore {
    /// Replaces the item's resource list, keeping what was already marked done.
    package func setResources(_ id: String, _ resources: [ItemResource]) throws(DownloadError) {
        try write { db in
            let old = try Self.fetchResources(db, id: id)
            let done = Dictionary(old.filter(\.done).map { ($0.key, $0.size) }, uniquingKeysWith: { a, _ in a })
            try db.execute(sql: "DELETE FROM item_resources WHERE item_id = ?", arguments: [id])
            for (position, resource) in resources.enumerated() {
                var resource = resource
                if let size = done[resource.key] {
                    resource.done = true
                    resource.size = resource.size ?? size
                }
                // An upsert, not INSERT OR REPLACE: its implicit delete would skip the item_totals delete trigger.
                try db.cachedStatement(
                    sql: """
                        INSERT INTO item_resources (item_id, key, url, kind, size, done, position) VALUES (?, ?, ?, ?, ?, ?, ?)
                        ON CONFLICT(item_id, key) DO UPDATE SET url = excluded.url, kind = excluded.kind, size = excluded.size,
                          done = excluded.done, position = excluded.position
                        """
                ).execute(arguments: [id, resource.key, resource.url, resource.kind, resource.size, resource.done, position])
            }
        }
    }

    /// Adds one resource at the end of the item's list, unless it is listed (the poster stored alone, `posterOnly`).
    package func addResource(_ id: String, _ resource: ItemResource) throws(DownloadError) {
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO item_resources (item_id, key, url, kind, size, done, position)
                    VALUES (?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(position), -1) + 1 FROM item_resources WHERE item_id = ?))
                    ON CONFLICT(item_id, key) DO NOTHING
                    """,
                arguments: [id, resource.key, resource.url, resource.kind, resource.size, resource.done, id])
        }
    }

    /// Marks the item's poster stored (`posterOnly`) and clears an earlier reason it was not; the progress counters,
    /// which count the stream, stay.
    package func markPosterStored(_ id: String, key: String, size: Int64) throws(DownloadError) {
        try write { db in
            try db.execute(sql: "UPDATE item_resources SET done = 1, size = ? WHERE item_id = ? AND key = ?", arguments: [size, id, key])
        }
        try update(id) { $0.posterError = nil }
    }

    /// Removes one resource from the item's list (a poster that could not be stored: the item goes on without it).
    package func removeResource(_ id: String, key: String) throws(DownloadError) {
        try write { db in try db.execute(sql: "DELETE FROM item_resources WHERE item_id = ? AND key = ?", arguments: [id, key]) }
    }

    /// The item's resources in download order.
    package func resources(_ id: String) throws(DownloadError) -> [ItemResource] {
        try read { db in try Self.fetchResources(db, id: id) }
    }

    /// The resources of one kind (keys) of each of the items `ids`, in download order, in one read: a listing page.
    package func resources(of ids: [String], kind: String) throws(DownloadError) -> [String: [ItemResource]] {
        guard !ids.isEmpty else { return [:] }
        return try read { db in
            var result: [String: [ItemResource]] = [:]
            for chunk in stride(from: 0, to: ids.count, by: 500).map({ Array(ids[$0..<min($0 + 500, ids.count)]) }) {
                let sql = """
                    SELECT item_id, key, url, kind, size, done FROM item_resources
                    WHERE kind = ? AND item_id IN (\(chunk.map { _ in "?" }.joined(separator: ", "))) ORDER BY item_id, position
                    """
                for row in try Row.fetchAll(db, sql: sql, arguments: StatementArguments([kind] + chunk)) {
                    result[row["item_id"], default: []].append(
                        ItemResource(key: row["key"], url: row["url"], kind: row["kind"], size: row["size"], done: row["done"]))
                }
            }
            return result
        }
    }

    /// The item's resources of one kind (its keys), in download order: a listing page asks this of every item on it.
    package func resources(_ id: String, kind: String) throws(DownloadError) -> [ItemResource] {
        try read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT key, url, kind, size, done FROM item_resources WHERE item_id = ? AND kind = ? ORDER BY position"),
                arguments: [id, kind]
            ).map { ItemResource(key: $0["key"], url: $0["url"], kind: $0["kind"], size: $0["size"], done: $0["done"]) }
        }
    }

    /// Marks one resource stored and updates the item's progress counters in the same transaction.
    ///
    /// The counters come from SQL aggregates and only the progress columns are written: decoding and re-sealing
    /// the whole item, and summing every resource in Swift, made this the largest cost of a prewarm
    /// (`Benchmarks/prewarm.sh`). Returns nil when the item is gone.
    @discardableResult
    package func markDone(_ id: String, key: String, size: Int64, estimatedTotal: @Sendable (ResourceTotals) -> Int64)
        throws(DownloadError) -> ItemProgressCounts?
    {
        try markDone(id, resources: [(key, size)], estimatedTotal: estimatedTotal)
    }

    /// Marks several resources stored (cache key and size each) in one transaction, then updates the progress
    /// counters once; the downloader gathers what finished within a short interval (``ProgressBatch``).
    @discardableResult
    package func markDone(
        _ id: String, resources: [(key: String, size: Int64)], estimatedTotal: @Sendable (ResourceTotals) -> Int64,
        bytesPerSecond: Double? = nil
    )
        throws(DownloadError) -> ItemProgressCounts?
    {
        try write { db in
            let mark = try db.cachedStatement(sql: "UPDATE item_resources SET done = 1, size = ? WHERE item_id = ? AND key = ?")
            for (key, size) in resources { try mark.execute(arguments: [size, id, key]) }
            let totals = try Self.resourceTotals(db, id: id)
            let counts = ItemProgressCounts(
                bytesDone: totals.bytesDone, bytesTotal: max(totals.bytesDone, estimatedTotal(totals)), segmentsDone: totals.segmentsDone,
                segmentsTotal: totals.segmentsTotal)
            try db.cachedStatement(
                sql: """
                    UPDATE items SET bytes_done = ?, bytes_total = ?, segments_done = ?, segments_total = ?, updated_at = ?,
                      bytes_per_second = ?
                    WHERE id = ?
                    """
            ).execute(
                arguments: [
                    counts.bytesDone, counts.bytesTotal, counts.segmentsDone, counts.segmentsTotal, Date().timeIntervalSince1970,
                    bytesPerSecond, id,
                ])
            return db.changesCount > 0 ? counts : nil
        }
    }

    /// The sums ``markDone(_:key:size:estimatedTotal:)`` works from: one row of `item_totals`, however long the item.
    static func resourceTotals(_ db: Database, id: String) throws -> ResourceTotals {
        let statement = try db.cachedStatement(sql: "SELECT \(totalsColumns) FROM item_totals WHERE item_id = ?")
        return try totals(Row.fetchOne(statement, arguments: [id]))
    }

    /// The item's progress sums as stored now (its `item_totals` row; zeros without resources).
    func resourceTotals(_ id: String) throws(DownloadError) -> ResourceTotals {
        try read { db in try Self.resourceTotals(db, id: id) }
    }

    /// The same sums the slow way, over every resource row (the migration's source; tests compare the two).
    static func summedResourceTotals(_ db: Database, id: String) throws -> ResourceTotals {
        try totals(
            Row.fetchOne(db, sql: "SELECT \(totalsExpressions(of: "")) FROM item_resources WHERE item_id = ?", arguments: [id]))
    }

    static func totals(_ row: Row?) -> ResourceTotals {
        ResourceTotals(
            bytesDone: row?[0] ?? 0, segmentsDone: row?[1] ?? 0, segmentsTotal: row?[2] ?? 0, doneSegmentBytes: row?[3] ?? 0,
            knownBytes: row?[4] ?? 0, unknownSegments: row?[5] ?? 0)
    }
    /// Whether another item that is not expired or deleted (and, with `lockedOnly`, is locked) lists `key`.
    package func isShared(_ key: String, except id: String, lockedOnly: Bool = false) throws(DownloadError) -> Bool {
        try read { db in
            let sql = """
                SELECT COUNT(*) FROM item_resources r JOIN items i ON i.id = r.item_id
                WHERE r.key = ? AND r.item_id != ? AND i.state NOT IN ('expired', 'deleted')\(lockedOnly ? " AND i.locked = 1" : "")
                """
            return try Int.fetchOne(db, sql: sql, arguments: [key, id]) ?? 0 > 0
        }
    }

    /// The expiries of the other items that are not expired or deleted and list `key` (`nil`: never expires).
    package func expiries(ofItemsListing key: String, except id: String) throws(DownloadError) -> [Date?] {
        try read { db in
            let sql = """
                SELECT i.expires_at FROM item_resources r JOIN items i ON i.id = r.item_id
                WHERE r.key = ? AND r.item_id != ? AND i.state NOT IN ('expired', 'deleted')
                """
            return try Double?.fetchAll(db, sql: sql, arguments: [key, id]).map { $0.map(Date.init(timeIntervalSince1970:)) }
        }
    }

}
