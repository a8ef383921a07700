import Foundation
import GRDB

/// Reading only the items that matter: the ones runnable now, the ones due to expire, and the ones changed since
/// a poller last looked. Reading every item (each one's JSON and sealed headers decoded) once a second is what an
/// idle `serve` spent a core on with 10,000 items (docs/benchmarks.md, "items at scale").
extension ItemStore {
    /// The columns a change bumps; `change_seq` itself is left out so the trigger does not fire on its own write.
    private static let changeColumns = [
        "id", "url", "selection", "renditions", "precache_seconds", "expires_at", "locked", "headers", "state", "error_code",
        "error_message", "bytes_done", "bytes_total", "segments_done", "segments_total", "created_at", "updated_at", "owner_pid",
        "owner_token",
    ]

    /// `change_seq` on every item row: the value of the one-row counter `item_changes` when the row was last inserted
    /// or updated, kept by triggers, so every writer (this process, the other one, a hand edit) keeps it right.
    /// Deleted rows leave no trace; ``ItemChangeFeed`` notices them by count.
    static var changeFeedSchema: String {
        let bump = """
            UPDATE item_changes SET seq = seq + 1 WHERE id = 1;
              UPDATE items SET change_seq = (SELECT seq FROM item_changes WHERE id = 1) WHERE id = NEW.id;
            """
        return """
            ALTER TABLE items ADD COLUMN change_seq INTEGER NOT NULL DEFAULT 0;
            CREATE TABLE item_changes (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL);
            INSERT INTO item_changes (id, seq) VALUES (1, 0);
            CREATE INDEX items_change_seq ON items (change_seq);
            CREATE INDEX items_expiry ON items (expires_at) WHERE expires_at IS NOT NULL;
            CREATE TRIGGER items_change_insert AFTER INSERT ON items BEGIN
              \(bump)
            END;
            CREATE TRIGGER items_change_update AFTER UPDATE OF \(changeColumns.joined(separator: ", ")) ON items BEGIN
              \(bump)
            END;
            """
    }

    /// Runnable items (`queued`, and `idle` ones whose next attempt is due at `now`), oldest first, at most `limit`,
    /// leaving out `excluding`.
    package func runnable(limit: Int, excluding: Set<String> = [], now: Date = Date()) throws(DownloadError) -> [DownloadItem] {
        guard limit > 0 else { return [] }
        return try read { db in
            // Enough rows to skip the excluded ones (items this process runs are `downloading`, so usually none).
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM items WHERE state = ? OR (state = ? AND (next_attempt_at IS NULL OR next_attempt_at <= ?))
                    ORDER BY created_at, id LIMIT ?
                    """,
                arguments: [ItemState.queued.rawValue, ItemState.idle.rawValue, now.timeIntervalSince1970, limit + excluding.count])
            return try rows.lazy.filter { !excluding.contains($0["id"]) }.prefix(limit).map(self.decode)
        }
    }

    /// Items whose expiry is at or before `now` and that are not `expired` or `deleted` yet.
    package func expiring(at now: Date) throws(DownloadError) -> [DownloadItem] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM items WHERE expires_at IS NOT NULL AND expires_at <= ? AND state NOT IN (?, ?)
                    ORDER BY expires_at
                    """,
                arguments: [now.timeIntervalSince1970, ItemState.expired.rawValue, ItemState.deleted.rawValue]
            ).map(self.decode)
        }
    }

    /// What changed since `sequence` (nil: everything), read in one snapshot: the changed rows, and — when the item
    /// count says some of `known` are gone — the ids removed (of `known`).
    func changes(since sequence: Int64?, known: Set<String>) throws(DownloadError)
        -> (sequence: Int64, changed: [DownloadItem], removed: [String])
    {
        try read { db in
            let current = try Int64.fetchOne(db, sql: "SELECT seq FROM item_changes WHERE id = 1") ?? 0
            guard let sequence else {
                return (current, try Row.fetchAll(db, sql: "SELECT * FROM items ORDER BY created_at, id").map(self.decode), [])
            }
            let changed = try Row.fetchAll(db, sql: "SELECT * FROM items WHERE change_seq > ? ORDER BY change_seq", arguments: [sequence])
                .map(self.decode)
            // Every row now is either known or changed since: the count differs exactly when a known one is gone.
            let expected = known.union(changed.map(\.id))
            let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM items") ?? 0
            guard count != expected.count else { return (current, changed, []) }
            let present = Set(try String.fetchAll(db, sql: "SELECT id FROM items"))
            return (current, changed, expected.subtracting(present).sorted())
        }
    }
}
