import Foundation
import GRDB
import HLSCacheStore

/// The key store's SQLite file (`cache-dir/keys.sqlite`): a WAL `DatabasePool`, kept apart from the object index
/// so that deleting or rebuilding the cache index never touches keys, and shared safely by `serve`, `fetch` and
/// `hlscache keys`. Only sealed bytes are ever written here.
struct KeyDatabase: Sendable {
    static let fileName = "keys.sqlite"
    private static let columns =
        "id, url, host, registered_at, fetched_at, expires_at, item_expires_at, sealed, master_id, last_error, headers_sealed, method"

    let pool: DatabasePool

    init(path: String) throws(KeyError) {
        // Another process may hold the write lock for one short transaction.
        let configuration = SQLiteFiles.configuration(label: "hlscache.keys")
        do {
            pool = try SQLiteFiles.openMigrated(path: path, configuration: configuration, migrator: Self.migrator)
        } catch {
            let directory = (path as NSString).deletingLastPathComponent
            if SQLiteFiles.isDiskFull(error, directory: directory) {
                throw KeyError.storage.with("cannot open \(path): \(SQLiteFiles.fullDisk(directory))")
            }
            throw KeyError.storage.with("cannot open \(path): \(Self.describe(error))")
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-keys") { db in
            try db.create(table: "keys") { t in
                t.column("id", .text).notNull().primaryKey()
                t.column("url", .text).notNull()
                t.column("host", .text).notNull()
                t.column("registered_at", .double).notNull()
                t.column("fetched_at", .double)
                t.column("expires_at", .double)
                t.column("item_expires_at", .double)
                t.column("sealed", .blob)
                t.column("master_id", .text)
                t.column("last_error", .text)
            }
        }
        migrator.registerMigration("v2-key-headers") { db in
            // The headers of the item that registered the key (`hlscache fetch --header`), sealed like keys.
            try db.alter(table: "keys") { t in t.add(column: "headers_sealed", .blob) }
        }
        migrator.registerMigration("v3-key-method") { db in
            // The METHOD a playlist gave the key, which says its length (16 or 32 bytes): a wrong-sized answer of
            // its origin is refused instead of stored.
            try db.alter(table: "keys") { t in t.add(column: "method", .text) }
        }
        return migrator
    }

    /// Adds a key, or updates its URL (a fresh token) and, unless `.unchanged`, its item expiry, and, when given,
    /// its sealed headers.
    func register(
        id: KeyID, url: String, host: String, itemExpiry: ItemExpiry, sealedHeaders: [UInt8]?, method: String? = nil, now: Date
    ) throws(KeyError) {
        let (replace, date): (Bool, Date?) =
            switch itemExpiry {
            case .unchanged: (false, nil)
            case .never: (true, nil)
            case .at(let date): (true, date)
            }
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO keys (id, url, host, registered_at, item_expires_at, headers_sealed, method) VALUES (?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET url = excluded.url, host = excluded.host,
                        item_expires_at = CASE WHEN ? THEN excluded.item_expires_at ELSE keys.item_expires_at END,
                        headers_sealed = COALESCE(excluded.headers_sealed, keys.headers_sealed),
                        method = COALESCE(excluded.method, keys.method)
                    """,
                arguments: [
                    id.value, url, host, now.timeIntervalSince1970, date?.timeIntervalSince1970, sealedHeaders.map { Data($0) }, method,
                    replace,
                ])
        }
    }

    /// Drops the sealed bytes, the item's headers and expiries: the key is `pending` again (its item was
    /// deleted or expired). The row stays, so `/keys/{id}` still answers by fetching from the origin.
    func forget(_ id: KeyID) throws(KeyError) {
        try write { db in
            try db.execute(
                sql: """
                    UPDATE keys SET sealed = NULL, master_id = NULL, headers_sealed = NULL, item_expires_at = NULL,
                        fetched_at = NULL, expires_at = NULL WHERE id = ?
                    """,
                arguments: [id.value])
        }
    }

    /// Drops the sealed bytes of every key past its expiry (they can no longer be served), keeping the expiry so
    /// the key still reports `expired`; keys past their item's expiry also lose the item's headers.
    /// - Returns: the number of keys purged.
    func purgeExpired(now: Date) throws(KeyError) -> Int {
        try write { db in
            let now = now.timeIntervalSince1970
            try db.execute(
                sql: "UPDATE keys SET headers_sealed = NULL WHERE headers_sealed IS NOT NULL AND item_expires_at <= ?", arguments: [now])
            try db.execute(
                sql: """
                    UPDATE keys SET sealed = NULL WHERE sealed IS NOT NULL
                        AND (expires_at <= ? OR item_expires_at <= ?)
                    """,
                arguments: [now, now])
            return db.changesCount
        }
    }

    /// Records a freshly fetched key's sealed bytes and expiry.
    func store(id: KeyID, sealed: [UInt8], masterKeyID: String, fetchedAt: Date, expiresAt: Date?) throws(KeyError) {
        try write { db in
            try db.execute(
                sql: "UPDATE keys SET sealed = ?, master_id = ?, fetched_at = ?, expires_at = ?, last_error = NULL WHERE id = ?",
                arguments: [Data(sealed), masterKeyID, fetchedAt.timeIntervalSince1970, expiresAt?.timeIntervalSince1970, id.value])
        }
    }

    /// Drops the stored copy if it is still `sealed` (the copy a segment check failed with, not one fetched since),
    /// with its fetch time and expiry: the key reads `pending`, and its next use fetches it from the origin. The URL,
    /// the item's headers and expiry stay, so that fetch goes out as the last one did. `reason` becomes `last_error`.
    /// - Returns: whether the copy was dropped.
    func drop(_ id: KeyID, ifSealed sealed: [UInt8], reason: String) throws(KeyError) -> Bool {
        try write { db in
            try db.execute(
                sql: """
                    UPDATE keys SET sealed = NULL, master_id = NULL, fetched_at = NULL, expires_at = NULL, last_error = ?
                    WHERE id = ? AND sealed = ?
                    """,
                arguments: [reason, id.value, Data(sealed)])
            return db.changesCount > 0
        }
    }

    /// Caps the stored copy's expiry at `seconds` after it was fetched (a key a live playlist names).
    func cap(_ id: KeyID, secondsAfterFetch seconds: Double) throws(KeyError) {
        try write { db in
            try db.execute(
                sql: """
                    UPDATE keys SET expires_at = fetched_at + ?1
                    WHERE id = ?2 AND fetched_at IS NOT NULL AND (expires_at IS NULL OR expires_at > fetched_at + ?1)
                    """,
                arguments: [seconds, id.value])
        }
    }

    func recordFailure(id: KeyID, message: String) throws(KeyError) {
        try write { db in
            try db.execute(sql: "UPDATE keys SET last_error = ? WHERE id = ?", arguments: [message, id.value])
        }
    }

    func record(_ id: KeyID) throws(KeyError) -> KeyRecord? {
        try read { db in
            // A cached statement: a listing page of the admin API asks this for every item on it.
            try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.columns) FROM keys WHERE id = ?"), arguments: [id.value]).flatMap(
                Self.record(row:))
        }
    }

    func all() throws(KeyError) -> [KeyRecord] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT \(Self.columns) FROM keys ORDER BY host, id").compactMap(Self.record(row:))
        }
    }

    func delete(_ id: KeyID) throws(KeyError) {
        try write { db in try db.execute(sql: "DELETE FROM keys WHERE id = ?", arguments: [id.value]) }
    }

    private static func record(row: Row) -> KeyRecord? {
        guard let id = KeyID(row["id"] as String) else { return nil }
        func date(_ column: String) -> Date? { (row[column] as Double?).map(Date.init(timeIntervalSince1970:)) }
        return KeyRecord(
            id: id, url: row["url"], host: row["host"],
            registeredAt: date("registered_at") ?? Date(timeIntervalSince1970: 0),
            fetchedAt: date("fetched_at"), fetchedExpiresAt: date("expires_at"), itemExpiresAt: date("item_expires_at"),
            sealed: (row["sealed"] as Data?).map { [UInt8]($0) }, masterKeyID: row["master_id"], lastError: row["last_error"],
            sealedHeaders: (row["headers_sealed"] as Data?).map { [UInt8]($0) }, method: row["method"])
    }

    private func write<T>(_ body: (Database) throws -> T) throws(KeyError) -> T {
        do {
            return try pool.write(body)
        } catch {
            throw KeyError.storage.with(Self.describe(error))
        }
    }

    private func read<T>(_ body: (Database) throws -> T) throws(KeyError) -> T {
        do {
            return try pool.read(body)
        } catch {
            throw KeyError.storage.with(Self.describe(error))
        }
    }

    private static func describe(_ error: any Error) -> String {
        (error as? DatabaseError)?.message ?? "\(error)"
    }
}
