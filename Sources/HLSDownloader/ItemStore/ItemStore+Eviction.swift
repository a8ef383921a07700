import Foundation
import GRDB

/// Keeping items true to the store: what an eviction (or a re-check) found gone is no longer counted as stored.
extension ItemStore {
    /// What one eviction or re-check changed of one item.
    package struct StoredChange: Sendable, Hashable {
        /// The item as stored after the change.
        package var item: DownloadItem
        /// Its state before.
        package var previousState: ItemState
        /// Resources no longer stored (that counted as stored before).
        package var lost: Int
        /// Resources found stored that did not count as stored before (``verify``).
        package var found: Int
    }

    /// The states whose counters an eviction corrects; `expired` and `deleted` items have let their objects go.
    private static let liveStatesSQL = "('expired', 'deleted')"

    /// Marks the resources stored under `keys` as gone in every item listing them (not `expired` or `deleted` ones;
    /// only item `only` when given), recounts those items' progress and, for a `cached` or `partiallyCached` item,
    /// moves it to `partiallyCached` (segments left) or `evicted` (none) — one transaction.
    /// - Returns: the items changed, in id order.
    @discardableResult
    package func forgetStored(_ keys: [String], only: String? = nil) throws(DownloadError) -> [StoredChange] {
        guard !keys.isEmpty else { return [] }
        return try write { db in
            var lost: [String: Int] = [:]
            // Bounded statements: SQLite limits the number of parameters.
            for start in stride(from: 0, to: keys.count, by: 500) {
                let chunk = Array(keys[start..<min(keys.count, start + 500)])
                let marks = Array(repeating: "?", count: chunk.count).joined(separator: ", ")
                var arguments = StatementArguments(chunk)
                var filter = "key IN (\(marks)) AND done = 1 AND item_id IN (SELECT id FROM items WHERE state NOT IN \(Self.liveStatesSQL))"
                if let only {
                    filter += " AND item_id = ?"
                    arguments += [only]
                }
                for id in try String.fetchAll(db, sql: "SELECT item_id FROM item_resources WHERE \(filter)", arguments: arguments) {
                    lost[id, default: 0] += 1
                }
                try db.execute(sql: "UPDATE item_resources SET done = 0 WHERE \(filter)", arguments: arguments)
            }
            return try lost.keys.sorted().compactMap { id in try self.recount(db, id: id, lost: lost[id] ?? 0, found: 0) }
        }
    }

    /// Marks none of the item's resources stored and zeroes its counters (its objects were removed: `rm`, expiry);
    /// `except`: a resource that stays (the poster `rm --keep-metadata` keeps), not counted in the progress either.
    package func markNothingStored(_ id: String, except kept: String? = nil) throws(DownloadError) {
        try write { db in
            try db.execute(
                sql: "UPDATE item_resources SET done = 0 WHERE item_id = ? AND done = 1 AND key IS NOT ?", arguments: [id, kept])
            guard var item = try Row.fetchOne(db, sql: "SELECT * FROM items WHERE id = ?", arguments: [id]).map(decode) else { return }
            item.bytesDone = 0
            item.segmentsDone = 0
            item.updatedAt = Date()
            try save(db, item)
        }
    }

    /// Marks the item's resources under `keys` stored, with their sizes (what a re-check found in the store but the
    /// item did not count), and recounts its progress and missing resources (also with nothing found).
    @discardableResult
    package func markStored(_ id: String, _ found: [(key: String, size: Int64)]) throws(DownloadError) -> StoredChange? {
        try write { db in
            let mark = try db.cachedStatement(
                sql: "UPDATE item_resources SET done = 1, size = ? WHERE item_id = ? AND key = ? AND done = 0")
            var count = 0
            for (key, size) in found {
                try mark.execute(arguments: [size, id, key])
                count += db.changesCount
            }
            return try self.recount(db, id: id, lost: 0, found: count)
        }
    }

    /// The item's counters from its `item_totals` row after resources changed, and its state after `lost` of them
    /// went; `missingResources` counts what a complete item lacks.
    private func recount(_ db: Database, id: String, lost: Int, found: Int) throws -> StoredChange? {
        guard var item = try Row.fetchOne(db, sql: "SELECT * FROM items WHERE id = ?", arguments: [id]).map(decode) else { return nil }
        let previous = item.state
        let totals = try Self.resourceTotals(db, id: id)
        item.bytesDone = totals.bytesDone
        item.segmentsDone = totals.segmentsDone
        switch item.state {
        case .cached, .partiallyCached, .evicted:
            item.missingResources =
                try Int.fetchOne(
                    db, sql: "SELECT COUNT(*) FROM item_resources WHERE item_id = ? AND done = 0", arguments: [id]) ?? 0
            if lost > 0 {
                // The action is `persist` (done below); the downloader announces the change (``StoredChange``).
                _ = try Self.move(&item, .evict(segmentsLeft: totals.segmentsDone > 0))
            }
        case .queued, .ready, .downloading, .recording, .paused, .idle, .failed, .expired, .deleted:
            break
        }
        item.updatedAt = Date()
        try save(db, item)
        return StoredChange(item: item, previousState: previous, lost: lost, found: found)
    }
}
