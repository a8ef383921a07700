import Foundation
import GRDB
import Synchronization

/// The SQLite index (`index.sqlite`): a WAL `DatabasePool`, shared safely by the server and `hlscache fetch`.
///
/// Every mutation is one short transaction; readers never block writers. The in-memory map in
/// ``CacheStore`` is a cache of this table, which stays the truth across processes.
struct IndexDatabase: Sendable {
    let pool: DatabasePool

    init(path: String) throws {
        // The other process may hold the write lock for one transaction; wait instead of failing.
        let configuration = SQLiteFiles.configuration(label: "hlscache.index")
        do {
            pool = try SQLiteFiles.openMigrated(path: path, configuration: configuration, migrator: Self.migrator)
        } catch let error as DatabaseError {
            let directory = (path as NSString).deletingLastPathComponent
            if SQLiteFiles.isDiskFull(error, directory: directory) {
                throw CacheStoreError.cacheFull.with("cannot open the index \(path): \(SQLiteFiles.fullDisk(directory))")
            }
            throw CacheStoreError.corrupted.with("cannot open the index \(path): \(error.message ?? "\(error)")")
        }
        self.path = path
    }

    /// The file's path (for messages).
    let path: String

    /// The first sign of damage a read or write met (SQLite's `SQLITE_CORRUPT`, `SQLITE_NOTADB`), for `/readyz`: the
    /// quick open after a clean close reads too little of the file to notice, and a damaged index answers every
    /// lookup it cannot read as a miss.
    let damage = Damage()

    /// ``damage``'s box (the struct is copied; the record is shared).
    final class Damage: Sendable {
        private let first = Mutex<String?>(nil)
        /// The first damage met, if any.
        var message: String? { first.withLock { $0 } }
        func record(_ message: String) { first.withLock { if $0 == nil { $0 = message } } }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-objects") { db in
            try db.create(table: "objects") { t in
                t.column("key_hash", .text).notNull().primaryKey()
                t.column("key", .text).notNull()
                t.column("size", .integer).notNull()
                t.column("content_type", .text)
                t.column("etag", .text).notNull()
                t.column("last_modified", .double)
                t.column("created_at", .double).notNull()
                t.column("last_access", .double).notNull()
                t.column("expires_at", .double)
                t.column("locked", .boolean).notNull().defaults(to: false)
                t.column("kind", .text).notNull().defaults(to: "other")
            }
            try db.create(index: "objects_last_access", on: "objects", columns: ["last_access"])
        }
        // The totals live in one row that triggers keep exact for every writer (this process, the other one, a
        // migration, a hand-made edit): `SUM(size)` over every row, twice per stored object (room check, cap check),
        // costs 5 ms a time with 50,000 objects, and a prewarm would slow down as the cache fills.
        migrator.registerMigration("v2-totals") { db in
            try db.execute(sql: Self.totalsSchema)
            try db.execute(sql: "INSERT INTO object_totals (id, bytes, count, locked_bytes) VALUES (1, 0, 0, 0)")
            try Self.recount(db)
        }
        // Eviction reads candidates in index order and stops when enough is freed (see evictionCandidates).
        migrator.registerMigration("v3-eviction-indexes") { db in
            try db.execute(
                sql: """
                    CREATE INDEX objects_evictable ON objects (locked, last_access);
                    CREATE INDEX objects_expiry ON objects (expires_at) WHERE expires_at IS NOT NULL;
                    """)
        }
        // A playlist fetched through a redirect resolves its relative URIs against the URL that answered; a stored
        // copy must remember it, or it resolves them against the key's URL (another directory) when read back.
        // And a digest of the tokens it was fetched with, so a restart still knows a player with new ones needs a
        // fresh copy.
        migrator.registerMigration("v4-location") { db in
            try db.execute(sql: "ALTER TABLE objects ADD COLUMN location TEXT; ALTER TABLE objects ADD COLUMN tokens TEXT")
        }
        // The headers IPTV channel lists name for their channels, sealed by the proxy (CacheStore+ChannelHeaders.swift).
        migrator.registerMigration("v5-channel-headers") { db in
            try db.execute(
                sql: """
                    CREATE TABLE channel_headers (url TEXT NOT NULL PRIMARY KEY, value BLOB NOT NULL, learned_at REAL NOT NULL);
                    CREATE INDEX channel_headers_learned ON channel_headers (learned_at);
                    """)
        }
        // Large objects are stored as slices, each an object of its own (its own file, LRU position and pin) that
        // says which object it belongs to, which slice it is and how large the whole object is; its `etag` is the
        // whole object's validator, so slices of two versions are told apart (docs/store.md, "Slices").
        migrator.registerMigration("v6-slices") { db in
            try db.execute(
                sql: """
                    ALTER TABLE objects ADD COLUMN slice_of TEXT;
                    ALTER TABLE objects ADD COLUMN slice_index INTEGER;
                    ALTER TABLE objects ADD COLUMN object_size INTEGER;
                    CREATE INDEX objects_slices ON objects (slice_of, slice_index) WHERE slice_of IS NOT NULL;
                    """)
        }
        return migrator
    }

    /// Runs a write transaction, mapping SQLite failures to ``CacheStoreError/database`` (``CacheStoreError/cacheFull``
    /// when the file system is full).
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.write(body)
        } catch let error as DatabaseError {
            throw mapped(error)
        }
    }

    private func mapped(_ error: DatabaseError) -> CacheStoreError {
        let directory = (path as NSString).deletingLastPathComponent
        if SQLiteFiles.isDiskFull(error, directory: directory) {
            return CacheStoreError.cacheFull.with("index: \(SQLiteFiles.fullDisk(directory))")
        }
        let message = error.message ?? "\(error)"
        if error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB { damage.record(message) }
        return CacheStoreError.database.with(message)
    }

    /// Runs a read, mapping SQLite failures to ``CacheStoreError/database``.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.read(body)
        } catch let error as DatabaseError {
            throw mapped(error)
        }
    }

    // The statements every lookup and commit runs are prepared once per connection (`cachedStatement`): compiling
    // them each time, with GRDB's authorizer called for every column, is a visible part of a prewarm.

    static func fetch(_ db: Database, keyHash: String) throws -> ObjectRow? {
        let statement = try db.cachedStatement(sql: "SELECT \(ObjectRow.columns) FROM objects WHERE key_hash = ?")
        return try Row.fetchOne(statement, arguments: [keyHash]).map(ObjectRow.init(row:))
    }

    /// Inserts `row`, or updates the row of the same key hash in place: an upsert, not `INSERT OR REPLACE`, whose
    /// implicit delete would bypass the totals' delete trigger (SQLite runs it only with recursive triggers on).
    static func upsert(_ db: Database, _ row: ObjectRow) throws {
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO objects (\(ObjectRow.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT(key_hash) DO UPDATE SET key = excluded.key, size = excluded.size,
                  content_type = excluded.content_type, etag = excluded.etag, last_modified = excluded.last_modified,
                  created_at = excluded.created_at, last_access = excluded.last_access, expires_at = excluded.expires_at,
                  locked = excluded.locked, kind = excluded.kind, location = excluded.location,
                  tokens = excluded.tokens, slice_of = excluded.slice_of, slice_index = excluded.slice_index,
                  object_size = excluded.object_size
                """)
        try statement.execute(arguments: row.arguments)
    }

    // MARK: - Totals

    /// The `object_totals` row and the triggers that keep it equal to the sums over `objects`.
    static let totalsSchema = """
        CREATE TABLE object_totals (
          id INTEGER PRIMARY KEY CHECK (id = 1),
          bytes INTEGER NOT NULL,
          count INTEGER NOT NULL,
          locked_bytes INTEGER NOT NULL
        );
        CREATE TRIGGER object_totals_insert AFTER INSERT ON objects BEGIN
          UPDATE object_totals SET bytes = bytes + NEW.size, count = count + 1,
            locked_bytes = locked_bytes + (CASE WHEN NEW.locked THEN NEW.size ELSE 0 END) WHERE id = 1;
        END;
        CREATE TRIGGER object_totals_delete AFTER DELETE ON objects BEGIN
          UPDATE object_totals SET bytes = bytes - OLD.size, count = count - 1,
            locked_bytes = locked_bytes - (CASE WHEN OLD.locked THEN OLD.size ELSE 0 END) WHERE id = 1;
        END;
        CREATE TRIGGER object_totals_update AFTER UPDATE OF size, locked ON objects BEGIN
          UPDATE object_totals SET bytes = bytes - OLD.size + NEW.size,
            locked_bytes = locked_bytes - (CASE WHEN OLD.locked THEN OLD.size ELSE 0 END)
              + (CASE WHEN NEW.locked THEN NEW.size ELSE 0 END) WHERE id = 1;
        END;
        """

    /// Total bytes and count of all objects: one row read, however large the cache.
    static func usage(_ db: Database) throws -> (bytes: Int64, count: Int) {
        let statement = try db.cachedStatement(sql: "SELECT bytes, count FROM object_totals WHERE id = 1")
        guard let row = try Row.fetchOne(statement) else { return (0, 0) }
        return (row[0], row[1])
    }

    /// Bytes of locked objects (which eviction cannot free).
    static func lockedBytes(_ db: Database) throws -> Int64 {
        let statement = try db.cachedStatement(sql: "SELECT locked_bytes FROM object_totals WHERE id = 1")
        return try Int64.fetchOne(statement) ?? 0
    }

    /// The totals computed the slow way, over every row.
    static func summedTotals(_ db: Database) throws -> (bytes: Int64, count: Int, lockedBytes: Int64) {
        let row = try Row.fetchOne(
            db,
            sql: """
                SELECT COALESCE(SUM(size), 0), COUNT(*), COALESCE(SUM(CASE WHEN locked THEN size ELSE 0 END), 0) FROM objects
                """)
        return (row?[0] ?? 0, row?[1] ?? 0, row?[2] ?? 0)
    }

    /// Sets the totals row from the rows themselves (the migration; a full recovery that finds them off).
    /// - Returns: whether they were off.
    @discardableResult
    static func recount(_ db: Database) throws -> Bool {
        let summed = try summedTotals(db)
        try db.execute(
            sql:
                "UPDATE object_totals SET bytes = ?, count = ?, locked_bytes = ? WHERE id = 1 AND (bytes != ? OR count != ? OR locked_bytes != ?)",
            arguments: [summed.bytes, summed.count, summed.lockedBytes, summed.bytes, summed.count, summed.lockedBytes])
        return db.changesCount > 0
    }

    static func delete(_ db: Database, keyHashes: [String]) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM objects WHERE key_hash = ?")
        for hash in keyHashes {
            try statement.execute(arguments: [hash])
        }
    }

    /// Eviction candidates, best first: expired objects (soonest expired first), then least recently used.
    /// Locked rows never appear; an expired row appears twice (the caller skips the repeat).
    ///
    /// Two index-ordered scans the caller stops reading as soon as enough is freed: one `ORDER BY` over an
    /// expression sorted the whole table on every eviction, and a full cache evicts on every write (a prewarm into
    /// a full 50,000-object cache took 7–21 s).
    static func evictionCandidates(_ db: Database, now: Double) throws -> [RowCursor] {
        [
            try Row.fetchCursor(db.cachedStatement(sql: expiredCandidatesSQL), arguments: [now]),
            try Row.fetchCursor(db.cachedStatement(sql: leastRecentlyUsedCandidatesSQL)),
        ]
    }

    static let expiredCandidatesSQL = """
        SELECT key_hash, key, size FROM objects INDEXED BY objects_expiry
        WHERE expires_at IS NOT NULL AND expires_at <= ? AND locked = 0 ORDER BY expires_at
        """
    static let leastRecentlyUsedCandidatesSQL = """
        SELECT key_hash, key, size FROM objects INDEXED BY objects_evictable WHERE locked = 0 ORDER BY last_access
        """
}
