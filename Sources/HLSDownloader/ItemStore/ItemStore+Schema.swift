import Foundation
import GRDB

/// The tables of `items.sqlite`, their migrations, and the triggers that keep `item_tags` and `item_totals`
/// equal to the rows they summarise.
extension ItemStore {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-items") { db in
            try db.create(table: "items") { t in
                t.column("id", .text).notNull().primaryKey()
                t.column("url", .text).notNull()
                t.column("selection", .text).notNull()
                t.column("renditions", .text).notNull()
                t.column("precache_seconds", .integer).notNull()
                t.column("expires_at", .double)
                t.column("locked", .boolean).notNull().defaults(to: false)
                t.column("headers", .text).notNull()
                t.column("state", .text).notNull()
                t.column("error_code", .text)
                t.column("error_message", .text)
                t.column("bytes_done", .integer).notNull().defaults(to: 0)
                t.column("bytes_total", .integer).notNull().defaults(to: 0)
                t.column("segments_done", .integer).notNull().defaults(to: 0)
                t.column("segments_total", .integer).notNull().defaults(to: 0)
                t.column("created_at", .double).notNull()
                t.column("updated_at", .double).notNull()
                t.column("owner_pid", .integer)
            }
            try db.create(index: "items_state", on: "items", columns: ["state"])
            try db.create(table: "item_resources") { t in
                t.column("item_id", .text).notNull()
                t.column("key", .text).notNull()
                t.column("url", .text).notNull()
                t.column("kind", .text).notNull()
                t.column("size", .integer)
                t.column("done", .boolean).notNull().defaults(to: false)
                t.column("position", .integer).notNull()
                t.primaryKey(["item_id", "key"])
            }
            try db.create(index: "item_resources_key", on: "item_resources", columns: ["key"])
        }
        migrator.registerMigration("v2-owner-token") { db in
            // The owner's boot id and start time next to its PID (see ProcessIdentity).
            try db.alter(table: "items") { t in t.add(column: "owner_token", .text) }
        }
        migrator.registerMigration("v3-consumption") { db in
            // Playback through the proxy (ItemStore+Consumption.swift); removed with the item.
            try db.create(table: "item_consumption") { t in
                t.column("item_id", .text).notNull().primaryKey()
                t.column("last_played_at", .double).notNull()
                t.column("served", .text).notNull()
            }
        }
        // Progress sums kept per item by triggers: markDone summed all of the item's resources for every stored
        // resource, so an item's bookkeeping grew with the square of its length.
        migrator.registerMigration("v4-item-totals") { db in
            try db.execute(sql: Self.totalsSchema)
            try db.execute(
                sql: """
                    INSERT INTO item_totals (item_id, bytes_done, segments_done, segments_total, done_segment_bytes, known_bytes,
                      unknown_segments)
                    SELECT item_id, \(Self.totalsExpressions(of: "")) FROM item_resources GROUP BY item_id
                    """)
        }
        // Every change to an item row gets a sequence number (ItemStore+Changes.swift), and expiry has an index: the
        // scheduler, `fetch`, `ls` and the admin API's poll each read every item (JSON and sealed headers decoded)
        // once a second or per command, so an idle `serve` with 10,000 items kept a core busy.
        migrator.registerMigration("v5-change-feed") { db in
            try db.execute(sql: Self.changeFeedSchema)
        }
        // Items that tell the truth (issue 25): an item interrupted by an unavailable origin waits in `idle` with its
        // reason and the time of its next attempt; started and completed times. An older process ignores these
        // columns (it reads by name) and, rewriting a row, resets them to NULL/0: the item is then retried at once
        // and its times are unknown, nothing worse.
        migrator.registerMigration("v6-item-lifecycle") { db in
            try db.alter(table: "items") { t in
                t.add(column: "started_at", .double)
                t.add(column: "completed_at", .double)
                t.add(column: "interrupted_at", .double)
                t.add(column: "next_attempt_at", .double)
                t.add(column: "interruptions", .integer).notNull().defaults(to: 0)
            }
        }
        // The truth about what is stored (issue 25): resources of a complete item that the cache evicted since.
        migrator.registerMigration("v7-missing-resources") { db in
            try db.alter(table: "items") { t in t.add(column: "missing_resources", .integer).notNull().defaults(to: 0) }
        }
        // An item's own bandwidth cap (`hlscache set --rate`).
        migrator.registerMigration("v8-item-rate") { db in
            try db.alter(table: "items") { t in t.add(column: "rate_limit", .integer) }
        }
        // The balancer an item is downloaded through (`fetch --through`, the API's `through`; docs/scale-out.md).
        migrator.registerMigration("item-through") { db in
            try db.alter(table: "items") { t in t.add(column: "through", .text) }
        }
        // Managing many items (issue 27): metadata (title, tags, poster, the caller's JSON), per-item policies (maximum
        // size, download hours), the day's download volume shared by every process, and the indexes the listing's
        // filters and sorts use at 10,000 items (docs/benchmarks.md).
        migrator.registerMigration("v9-items-at-scale") { db in
            try db.alter(table: "items") { t in
                t.add(column: "title", .text)
                t.add(column: "tags", .text).notNull().defaults(to: "[]")
                t.add(column: "poster_url", .text)
                t.add(column: "meta", .text)
                t.add(column: "max_bytes", .integer)
                t.add(column: "download_window", .text)
            }
            try db.create(table: "download_volume") { t in
                t.column("day", .text).notNull().primaryKey()
                t.column("bytes", .integer).notNull().defaults(to: 0)
            }
            try db.create(index: "items_created", on: "items", columns: ["created_at", "id"])
            try db.create(index: "items_updated", on: "items", columns: ["updated_at", "id"])
            try db.create(index: "items_url", on: "items", columns: ["url"])
            try db.create(index: "items_state_created", on: "items", columns: ["state", "created_at", "id"])
        }
        // The item's own daily download volume (issue 27: policies per item, like every setting), counted per item and day
        // by every process (ItemStore+Volume.swift); the rows go with the item.
        migrator.registerMigration("v10-item-daily-limit") { db in
            try db.alter(table: "items") { t in t.add(column: "daily_limit", .integer) }
            try db.create(table: "item_volume") { t in
                t.column("item_id", .text).notNull()
                t.column("day", .text).notNull()
                t.column("bytes", .integer).notNull().defaults(to: 0)
                t.primaryKey(["item_id", "day"])
            }
            try db.create(index: "item_volume_day", on: "item_volume", columns: ["day"])
        }
        // The tag filter as an index lookup (issue 27): one row per item and tag, kept by triggers on `items` in the same
        // statement as the item row (whichever process writes it), filled from the JSON column of the items there are.
        migrator.registerMigration("v11-item-tags") { db in
            try db.execute(sql: Self.tagsSchema)
            try db.execute(
                sql:
                    "INSERT OR IGNORE INTO item_tags (item_id, tag) SELECT items.id, t.value FROM items, json_each(\(Self.validTags("items.tags"))) t WHERE t.type = 'text'"
            )
        }
        // A poster the origin refuses does not fail its item: why, kept with the item (issue 27).
        migrator.registerMigration("v12-poster-error") { db in
            try db.alter(table: "items") { t in t.add(column: "poster_error", .text) }
        }
        // Webhook events not delivered when `serve` stopped, delivered at its next start (ItemStore+Outbox.swift).
        migrator.registerMigration("v13-webhook-outbox") { db in
            try db.create(table: "webhook_outbox") { t in
                t.autoIncrementedPrimaryKey("position")
                t.column("receiver", .text).notNull()
                t.column("delivery", .text).notNull()
                t.column("type", .text).notNull()
                t.column("body", .text).notNull()
            }
        }
        // Speed (issue 43): the moving average of the running download, written with its progress, so every process
        // (the API, `ls`, a follower) reads the same value.
        migrator.registerMigration("v14-item-speed") { db in
            try db.alter(table: "items") { t in t.add(column: "bytes_per_second", .double) }
        }
        // Live recordings (issue 44): what the item records (`record`, JSON) and every segment it stored or missed, by
        // rendition, in order (ItemStore+Recording.swift); the rows go with the item.
        migrator.registerMigration("v15-recording") { db in
            try db.alter(table: "items") { t in t.add(column: "record", .text) }
            try db.create(table: "item_recording") { t in
                t.column("item_id", .text).notNull()
                t.column("rendition", .integer).notNull()
                t.column("position", .integer).notNull()
                t.column("sequence", .integer).notNull()
                t.column("segment", .text).notNull()
                t.primaryKey(["item_id", "rendition", "position"])
            }
        }
        return migrator
    }

    /// The `tags` column as JSON `json_each` can read: a malformed value counts as no tags rather than failing the
    /// item's write.
    private static func validTags(_ column: String) -> String {
        "CASE WHEN json_valid(\(column)) AND json_type(\(column)) = 'array' THEN \(column) ELSE '[]' END"
    }

    /// `item_tags` and the triggers that keep it equal to each item's `tags`. A save is an INSERT OR REPLACE, whose
    /// implicit delete fires no trigger: the insert trigger clears the item's old rows first.
    private static var tagsSchema: String {
        let fill =
            "INSERT OR IGNORE INTO item_tags (item_id, tag) SELECT NEW.id, value FROM json_each(\(validTags("NEW.tags"))) WHERE type = 'text';"
        return """
            CREATE TABLE item_tags (item_id TEXT NOT NULL, tag TEXT NOT NULL, PRIMARY KEY (item_id, tag)) WITHOUT ROWID;
            CREATE INDEX item_tags_tag ON item_tags (tag, item_id);
            CREATE TRIGGER item_tags_insert AFTER INSERT ON items BEGIN
              DELETE FROM item_tags WHERE item_id = NEW.id;
              \(fill)
            END;
            CREATE TRIGGER item_tags_update AFTER UPDATE OF id, tags ON items BEGIN
              DELETE FROM item_tags WHERE item_id = OLD.id;
              \(fill)
            END;
            CREATE TRIGGER item_tags_delete AFTER DELETE ON items BEGIN
              DELETE FROM item_tags WHERE item_id = OLD.id;
            END;
            """
    }

    static let totalsColumns = "bytes_done, segments_done, segments_total, done_segment_bytes, known_bytes, unknown_segments"

    /// What one resource row (`prefix` `NEW.` or `OLD.` in a trigger, empty for a plain row) adds to each of the six
    /// sums; with `prefix` empty, wrapped in `SUM` for an aggregate over rows.
    static func totalsExpressions(of prefix: String, separator: String = ", ") -> String {
        let p = prefix
        let terms = [
            "CASE WHEN \(p)done THEN COALESCE(\(p)size, 0) ELSE 0 END",
            "CASE WHEN \(p)done AND \(p)kind = 'segment' THEN 1 ELSE 0 END",
            "CASE WHEN \(p)kind = 'segment' THEN 1 ELSE 0 END",
            "CASE WHEN \(p)done AND \(p)kind = 'segment' THEN COALESCE(\(p)size, 0) ELSE 0 END",
            "CASE WHEN \(p)done OR \(p)size IS NOT NULL THEN COALESCE(\(p)size, 0) ELSE 0 END",
            "CASE WHEN NOT \(p)done AND \(p)size IS NULL AND \(p)kind = 'segment' THEN 1 ELSE 0 END",
        ]
        return prefix.isEmpty ? terms.map { "COALESCE(SUM(\($0)), 0)" }.joined(separator: separator) : terms.joined(separator: separator)
    }

    /// `item_totals` and the triggers that keep each item's row equal to the sums over its `item_resources`.
    private static var totalsSchema: String {
        let columns = totalsColumns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        func adjust(_ sign: String, _ prefix: String) -> String {
            let terms = totalsExpressions(of: prefix, separator: "\u{0}").split(separator: "\u{0}")
            return zip(columns, terms).map { "\($0) = \($0) \(sign) (\($1))" }.joined(separator: ", ")
        }
        // Not INSERT OR IGNORE: inside a trigger, the outer statement's conflict policy (an upsert's) overrides it.
        let ensureRow =
            "INSERT INTO item_totals (item_id) SELECT NEW.item_id WHERE NOT EXISTS (SELECT 1 FROM item_totals WHERE item_id = NEW.item_id);"
        return """
            CREATE TABLE item_totals (
              item_id TEXT PRIMARY KEY NOT NULL,
              \(columns.map { "\($0) INTEGER NOT NULL DEFAULT 0" }.joined(separator: ", "))
            );
            CREATE TRIGGER item_totals_insert AFTER INSERT ON item_resources BEGIN
              \(ensureRow)
              UPDATE item_totals SET \(adjust("+", "NEW.")) WHERE item_id = NEW.item_id;
            END;
            CREATE TRIGGER item_totals_delete AFTER DELETE ON item_resources BEGIN
              UPDATE item_totals SET \(adjust("-", "OLD.")) WHERE item_id = OLD.item_id;
            END;
            CREATE TRIGGER item_totals_update AFTER UPDATE ON item_resources BEGIN
              UPDATE item_totals SET \(adjust("-", "OLD.")) WHERE item_id = OLD.item_id;
              \(ensureRow)
              UPDATE item_totals SET \(adjust("+", "NEW.")) WHERE item_id = NEW.item_id;
            END;
            CREATE TRIGGER item_totals_purge AFTER DELETE ON items BEGIN
              DELETE FROM item_totals WHERE item_id = OLD.id;
            END;
            """
    }

}
