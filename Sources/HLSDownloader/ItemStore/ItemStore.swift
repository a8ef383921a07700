import Foundation
import GRDB
import HLSCacheStore
import HLSKeys

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The items table (`items.sqlite` in the cache directory, next to the store's `index.sqlite`): a GRDB WAL
/// `DatabasePool` that `serve`, `fetch` and the item commands open at the same time.
///
/// Every state change goes through ``ItemStateMachine`` inside one write transaction, so two processes never
/// make conflicting transitions. An item being downloaded names its process (`owner_pid`); an item left in
/// `downloading` by a process that is gone is interrupted (`idle`) — see ``recoverInterrupted()``.
package final class ItemStore: Sendable {
    /// The database file.
    package let path: String
    private let pool: DatabasePool

    /// How the `headers` column is written: sealed under the master key when there is one.
    private let headerCoding: ItemHeaderCoding

    /// Opens (creating if needed) `items.sqlite` in `directory`.
    /// - Parameter masterKey: seals the items' request headers (`fetch --header`: cookies, tokens) at rest, as the
    ///   key store seals keys; without it they are stored as plain JSON.
    /// - Parameter busyTimeout: how long a write waits for another process's write to finish before it fails.
    /// - Throws: ``DownloadError/corrupted`` when the file is not a usable database.
    package init(directory: String, masterKey: MasterKey? = nil, busyTimeout: TimeInterval = 10) throws(DownloadError) {
        headerCoding = ItemHeaderCoding(masterKey: masterKey)
        path = directory + "/items.sqlite"
        let configuration = SQLiteFiles.configuration(label: "hlscache.items", busyTimeout: busyTimeout)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            pool = try SQLiteFiles.openMigrated(path: path, configuration: configuration, migrator: Self.migrator)
        } catch {
            if SQLiteFiles.isDiskFull(error, directory: directory) {
                throw DownloadError.cacheFull.with("cannot open the items database \(path): \(SQLiteFiles.fullDisk(directory))")
            }
            throw DownloadError.corrupted.with("cannot open the items database \(path): \(error)")
        }
    }

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

    // MARK: - Items

    /// Records a new item.
    /// - Throws: ``DownloadError/invalidState`` when the id is taken.
    package func insert(_ item: DownloadItem) throws(DownloadError) {
        try write { db in
            if try self.fetch(db, id: item.id) != nil {
                throw DownloadError.invalidState.with("an item with id \(item.id) already exists")
            }
            try self.save(db, item)
        }
    }

    /// The item with `id`, or `nil`.
    package func item(_ id: String) throws(DownloadError) -> DownloadItem? {
        try read { db in try self.fetch(db, id: id) }
    }

    /// The item with `id`.
    /// - Throws: ``DownloadError/unknownItem``.
    package func require(_ id: String) throws(DownloadError) -> DownloadItem {
        guard let item = try item(id) else { throw DownloadError.unknownItem.with("no item with id \(id)") }
        return item
    }

    /// All items (optionally in one state), oldest first.
    package func items(state: ItemState? = nil) throws(DownloadError) -> [DownloadItem] {
        try read { db in
            let rows: [Row]
            if let state {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM items WHERE state = ? ORDER BY created_at, id", arguments: [state.rawValue])
            } else {
                rows = try Row.fetchAll(db, sql: "SELECT * FROM items ORDER BY created_at, id")
            }
            return try rows.map(self.decode)
        }
    }

    /// Applies `event` to the item's state machine and persists the result in one transaction.
    ///
    /// - Parameter change: further changes to the item in the same transaction (error code, progress).
    /// - Returns: the item as stored and the action to run (the downloader runs it: `Downloader.transition`).
    /// - Throws: ``DownloadError/unknownItem``, ``DownloadError/invalidState``.
    @discardableResult
    package func apply(
        _ event: ItemStateMachine.Event, to id: String, change: @Sendable (inout DownloadItem) -> Void = { _ in }
    ) throws(DownloadError) -> (item: DownloadItem, action: ItemStateMachine.Action) {
        try write { db in
            guard var item = try self.fetch(db, id: id) else { throw DownloadError.unknownItem.with("no item with id \(id)") }
            let action = try Self.move(&item, event)
            change(&item)
            item.updatedAt = Date()
            try self.save(db, item)
            return (item, action)
        }
    }

    /// Runs `event` through the item's state machine and does what the event means for the item's other fields
    /// (its owner, error, timestamps): the one place an item's state changes, for ``apply(_:to:change:)``,
    /// ``claim(_:)``, ``recoverInterrupted()`` and evictions.
    /// - Throws: ``DownloadError/invalidState`` when `event` does not apply; `item` is unchanged then.
    static func move(_ item: inout DownloadItem, _ event: ItemStateMachine.Event) throws(DownloadError) -> ItemStateMachine.Action {
        var machine = ItemStateMachine(state: item.state)
        let action = try machine.handle(event)
        item.state = machine.state
        switch event {
        case .start:
            item.ownerPID = getpid()
            item.ownerToken = ProcessIdentity.current
            item.errorCode = nil
            item.errorMessage = nil
            // `interruptedAt` and `interruptions` stay: the next interruption in a row waits longer.
            item.nextAttemptAt = nil
            item.startedAt = item.startedAt ?? Date()
        case .fail(let code):
            item.errorCode = code
            item.ownerPID = nil
            item.ownerToken = nil
            item.clearInterruption()
        case .finish:
            item.ownerPID = nil
            item.ownerToken = nil
            item.completedAt = Date()
            item.missingResources = 0
            item.clearInterruption()
        case .expire:
            // api.md: `error` and `message` say why an item failed or expired.
            item.errorCode = DownloadError.expired.code
            item.errorMessage =
                item.expiresAt.map { "the item expired at \($0.ISO8601Format()) (its --expires)" }
                ?? "the item expired"
            item.ownerPID = nil
            item.ownerToken = nil
        case .resume:
            item.errorCode = nil
            item.errorMessage = nil
            item.ownerPID = nil
            item.ownerToken = nil
            item.completedAt = nil
            item.clearInterruption()
        case .pause, .delete:
            item.ownerPID = nil
            item.ownerToken = nil
            item.nextAttemptAt = nil
        case .interrupt, .hold:
            item.ownerPID = nil
            item.ownerToken = nil
        case .evict:
            break
        }
        return action
    }

    /// Claims a runnable item (`queued`, `idle`, or `downloading` by a process that is gone) for this process: the
    /// `.start` transition, made only when no live process runs the item (its action, ``ItemStateMachine/Action/startDownload``,
    /// is the caller's run).
    /// - Returns: the item now `downloading`, or `nil` when it is not runnable (another live process has it,
    ///   it is paused, settled or gone).
    package func claim(_ id: String) throws(DownloadError) -> DownloadItem? {
        try write { db in
            guard var item = try self.fetch(db, id: id) else { return nil }
            if item.state == .downloading, let owner = item.ownerPID, !ProcessIdentity.isAlive(owner, token: item.ownerToken) {
                _ = try Self.move(&item, .interrupt)
            }
            guard item.state.isRunnable, (try? Self.move(&item, .start)) != nil else { return nil }
            item.updatedAt = Date()
            try self.save(db, item)
            return item
        }
    }

    /// Changes fields other than the state (progress, renditions, lock, expiry) in one transaction.
    @discardableResult
    package func update(_ id: String, _ change: @Sendable (inout DownloadItem) -> Void) throws(DownloadError) -> DownloadItem {
        try write { db in
            guard var item = try self.fetch(db, id: id) else { throw DownloadError.unknownItem.with("no item with id \(id)") }
            let state = item.state
            change(&item)
            item.state = state
            item.updatedAt = Date()
            try self.save(db, item)
            return item
        }
    }

    /// Items left `downloading` by a process that no longer runs become `idle` (docs/design.md §5: interrupted,
    /// resumes by itself). Called at the start of every command and by the scheduler.
    /// - Returns: the ids changed.
    @discardableResult
    package func recoverInterrupted() throws(DownloadError) -> [String] {
        try write { db in
            var changed: [String] = []
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM items WHERE state = ?", arguments: [ItemState.downloading.rawValue])
            for row in rows {
                var item = try self.decode(row)
                if let owner = item.ownerPID, ProcessIdentity.isAlive(owner, token: item.ownerToken) { continue }
                // Its action, stopping the download, has nothing to stop: the process that ran it is gone.
                _ = try Self.move(&item, .interrupt)
                item.updatedAt = Date()
                try self.save(db, item)
                changed.append(item.id)
            }
            return changed
        }
    }

    /// Deletes the item's rows (the `rm` without `--keep-metadata`).
    package func purge(_ id: String) throws(DownloadError) {
        try write { db in
            try db.execute(sql: "DELETE FROM item_resources WHERE item_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM item_consumption WHERE item_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM item_volume WHERE item_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [id])
        }
    }

    // MARK: - Resources

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
    package func markDone(_ id: String, resources: [(key: String, size: Int64)], estimatedTotal: @Sendable (ResourceTotals) -> Int64)
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
                    UPDATE items SET bytes_done = ?, bytes_total = ?, segments_done = ?, segments_total = ?, updated_at = ?
                    WHERE id = ?
                    """
            ).execute(
                arguments: [
                    counts.bytesDone, counts.bytesTotal, counts.segmentsDone, counts.segmentsTotal, Date().timeIntervalSince1970, id,
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

    private static func totals(_ row: Row?) -> ResourceTotals {
        ResourceTotals(
            bytesDone: row?[0] ?? 0, segmentsDone: row?[1] ?? 0, segmentsTotal: row?[2] ?? 0, doneSegmentBytes: row?[3] ?? 0,
            knownBytes: row?[4] ?? 0, unknownSegments: row?[5] ?? 0)
    }

    private static let totalsColumns = "bytes_done, segments_done, segments_total, done_segment_bytes, known_bytes, unknown_segments"

    /// What one resource row (`prefix` `NEW.` or `OLD.` in a trigger, empty for a plain row) adds to each of the six
    /// sums; with `prefix` empty, wrapped in `SUM` for an aggregate over rows.
    private static func totalsExpressions(of prefix: String, separator: String = ", ") -> String {
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

    // MARK: - Rows

    /// A SQLite failure as a ``DownloadError``: ``DownloadError/cacheFull`` when the file system is full (an item
    /// command then exits 5, not 6 "corrupted"), else ``DownloadError/corrupted``.
    private func mapped(_ error: any Error) -> DownloadError {
        let directory = (path as NSString).deletingLastPathComponent
        if SQLiteFiles.isDiskFull(error, directory: directory) {
            return DownloadError.cacheFull.with("items database: \(SQLiteFiles.fullDisk(directory))")
        }
        return DownloadError.corrupted.with("items database: \(error)")
    }

    func write<T>(_ body: (Database) throws -> T) throws(DownloadError) -> T {
        do {
            return try pool.write(body)
        } catch let error as DownloadError {
            throw error
        } catch {
            throw mapped(error)
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws(DownloadError) -> T {
        do {
            return try pool.read(body)
        } catch let error as DownloadError {
            throw error
        } catch {
            throw mapped(error)
        }
    }

    private func fetch(_ db: Database, id: String) throws -> DownloadItem? {
        try Row.fetchOne(db, sql: "SELECT * FROM items WHERE id = ?", arguments: [id]).map(self.decode)
    }

    private static func fetchResources(_ db: Database, id: String) throws -> [ItemResource] {
        try Row.fetchAll(
            db, sql: "SELECT key, url, kind, size, done FROM item_resources WHERE item_id = ? ORDER BY position", arguments: [id]
        )
        .map { ItemResource(key: $0["key"], url: $0["url"], kind: $0["kind"], size: $0["size"], done: $0["done"]) }
    }

    private static let encoder = JSONEncoder()
    private static let decoder = JSONDecoder()

    private static func json<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    func decode(_ row: Row) throws -> DownloadItem {
        var item = DownloadItem(
            id: row["id"], url: row["url"],
            selection: try Self.decoder.decode(RenditionSelection.self, from: Data((row["selection"] as String).utf8)),
            precacheSeconds: row["precache_seconds"],
            expiresAt: (row["expires_at"] as Double?).map { Date(timeIntervalSince1970: $0) },
            locked: row["locked"],
            headers: try headerCoding.decode(row["headers"], itemID: row["id"]),
            now: Date(timeIntervalSince1970: row["created_at"]))
        item.renditions = try Self.decoder.decode([String].self, from: Data((row["renditions"] as String).utf8))
        item.through = row["through"]
        item.state = ItemState(rawValue: row["state"]) ?? .failed
        item.errorCode = row["error_code"]
        item.errorMessage = row["error_message"]
        item.bytesDone = row["bytes_done"]
        item.bytesTotal = row["bytes_total"]
        item.segmentsDone = row["segments_done"]
        item.segmentsTotal = row["segments_total"]
        item.updatedAt = Date(timeIntervalSince1970: row["updated_at"])
        item.ownerPID = (row["owner_pid"] as Int64?).map { Int32(truncatingIfNeeded: $0) }
        item.ownerToken = row["owner_token"]
        item.startedAt = (row["started_at"] as Double?).map { Date(timeIntervalSince1970: $0) }
        item.completedAt = (row["completed_at"] as Double?).map { Date(timeIntervalSince1970: $0) }
        item.interruptedAt = (row["interrupted_at"] as Double?).map { Date(timeIntervalSince1970: $0) }
        item.nextAttemptAt = (row["next_attempt_at"] as Double?).map { Date(timeIntervalSince1970: $0) }
        item.interruptions = (row["interruptions"] as Int?) ?? 0
        item.missingResources = (row["missing_resources"] as Int?) ?? 0
        item.rateLimit = row["rate_limit"]
        item.maxBytes = row["max_bytes"]
        item.downloadWindow = (row["download_window"] as String?).flatMap(DownloadWindow.init(parsing:))
        item.dailyBytes = row["daily_limit"]
        item.title = row["title"]
        item.tags = ((row["tags"] as String?).flatMap { try? Self.decoder.decode([String].self, from: Data($0.utf8)) }) ?? []
        item.posterURL = row["poster_url"]
        item.posterError = row["poster_error"]
        item.metadata = row["meta"]
        return item
    }

    func save(_ db: Database, _ item: DownloadItem) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO items (id, url, selection, renditions, precache_seconds, expires_at, locked, headers, state,
                  error_code, error_message, bytes_done, bytes_total, segments_done, segments_total, created_at, updated_at, owner_pid,
                  owner_token, started_at, completed_at, interrupted_at, next_attempt_at, interruptions, missing_resources, rate_limit,
                  max_bytes, download_window, title, tags, poster_url, meta, daily_limit, poster_error)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                item.id, item.url, try Self.json(item.selection), try Self.json(item.renditions), item.precacheSeconds,
                item.expiresAt?.timeIntervalSince1970, item.locked, try headerCoding.encode(item.headers, itemID: item.id),
                item.state.rawValue,
                item.errorCode, item.errorMessage, item.bytesDone, item.bytesTotal, item.segmentsDone, item.segmentsTotal,
                item.createdAt.timeIntervalSince1970, item.updatedAt.timeIntervalSince1970, item.ownerPID.map { Int64($0) },
                item.ownerToken, item.startedAt?.timeIntervalSince1970, item.completedAt?.timeIntervalSince1970,
                item.interruptedAt?.timeIntervalSince1970, item.nextAttemptAt?.timeIntervalSince1970, item.interruptions,
                item.missingResources, item.rateLimit, item.maxBytes, item.downloadWindow?.description, item.title,
                try Self.json(item.tags), item.posterURL, item.metadata, item.dailyBytes, item.posterError,
            ])
        // Its own statement, so the long one above stays as it is for the other columns; it writes only a new value.
        try db.execute(sql: "UPDATE items SET through = ?1 WHERE id = ?2 AND through IS NOT ?1", arguments: [item.through, item.id])
    }
}
