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

    /// Records the items not stored yet, in one transaction. An item exists when its id is taken (by an item stored
    /// or one earlier in the list) or, for one whose `matchURL` is set (no id was asked for), when an item of the same
    /// origin URL is stored: the answer gives, for each, `nil` when it was recorded, else the existing item's id.
    /// `recorded` is called for each inside the transaction, before it commits: a scheduler cannot claim an item
    /// before it is announced.
    package func insertNew(
        _ items: [(item: DownloadItem, matchURL: Bool)], recorded: (DownloadItem) -> Void = { _ in }
    ) throws(DownloadError) -> [String?] {
        try write { db in
            var ids: Set<String> = []
            var urls: [String: String] = [:]
            var answers: [String?] = []
            for (item, matchURL) in items {
                let taken = try ids.contains(item.id) || self.fetch(db, id: item.id) != nil
                if taken {
                    answers.append(item.id)
                    continue
                }
                if matchURL {
                    var existing = urls[item.url]
                    if existing == nil {
                        existing = try String.fetchOne(
                            db, sql: "SELECT id FROM items WHERE url = ? ORDER BY created_at LIMIT 1", arguments: [item.url])
                    }
                    if let existing {
                        answers.append(existing)
                        continue
                    }
                }
                ids.insert(item.id)
                urls[item.url] = urls[item.url] ?? item.id
                recorded(item)
                try self.save(db, item)
                answers.append(nil)
            }
            return answers
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
        // A recording runs as `recording` (the same transitions as `downloading`).
        if item.state == .downloading && item.record != nil { item.state = .recording }
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
            if item.state.isActive, let owner = item.ownerPID, !ProcessIdentity.isAlive(owner, token: item.ownerToken) {
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
            let rows = try Row.fetchAll(
                db, sql: "SELECT * FROM items WHERE state IN (?, ?)",
                arguments: [ItemState.downloading.rawValue, ItemState.recording.rawValue])
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
        try write { db in try Self.deleteRows(of: id, db) }
    }

    /// `downloads.autoPurge`: deletes the rows of every `expired` item that is not locked, in one transaction (an item
    /// resumed or locked meanwhile is left alone).
    /// - Returns: the ids removed.
    package func purgeExpiredUnlocked() throws(DownloadError) -> [String] {
        try write { db in
            let ids = try String.fetchAll(
                db, sql: "SELECT id FROM items WHERE state = ? AND locked = 0 ORDER BY id", arguments: [ItemState.expired.rawValue])
            for id in ids { try Self.deleteRows(of: id, db) }
            return ids
        }
    }

    private static func deleteRows(of id: String, _ db: Database) throws {
        try db.execute(sql: "DELETE FROM item_resources WHERE item_id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM item_consumption WHERE item_id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM item_volume WHERE item_id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM item_recording WHERE item_id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM items WHERE id = ?", arguments: [id])
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

    static func fetchResources(_ db: Database, id: String) throws -> [ItemResource] {
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
        item.storedBytesPerSecond = row["bytes_per_second"]
        item.record = (row["record"] as String?).flatMap { try? Self.decoder.decode(RecordSpec.self, from: Data($0.utf8)) }
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
        let record = try item.record.map { try Self.json($0) }
        try db.execute(sql: "UPDATE items SET record = ?1 WHERE id = ?2 AND record IS NOT ?1", arguments: [record, item.id])
    }
}
