import Foundation
import GRDB

/// The SQLite index (`index.sqlite`): a WAL `DatabasePool`, shared safely by the server and `hlscache fetch`.
///
/// Every mutation is one short transaction; readers never block writers. The in-memory map in
/// ``CacheStore`` is a cache of this table, which stays the truth across processes.
struct IndexDatabase: Sendable {
    let pool: DatabasePool

    init(path: String) throws {
        var configuration = Configuration()
        // The other process may hold the write lock for one transaction; wait instead of failing.
        configuration.busyMode = .timeout(10)
        configuration.label = "hlscache.index"
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
        } catch let error as DatabaseError {
            throw CacheStoreError.corrupted.with("cannot open the index \(path): \(error.message ?? "\(error)")")
        }
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
        return migrator
    }

    /// Runs a write transaction, mapping SQLite failures to ``CacheStoreError/database``.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.write(body)
        } catch let error as DatabaseError {
            throw CacheStoreError.database.with(error.message ?? "\(error)")
        }
    }

    /// Runs a read, mapping SQLite failures to ``CacheStoreError/database``.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.read(body)
        } catch let error as DatabaseError {
            throw CacheStoreError.database.with(error.message ?? "\(error)")
        }
    }

    static func fetchAll(_ db: Database) throws -> [ObjectRow] {
        try Row.fetchAll(db, sql: "SELECT \(ObjectRow.columns) FROM objects").map(ObjectRow.init(row:))
    }

    // The statements every lookup and commit runs are prepared once per connection (`cachedStatement`): compiling
    // them each time, with GRDB's authorizer called for every column, was a visible part of a prewarm.

    static func fetch(_ db: Database, keyHash: String) throws -> ObjectRow? {
        let statement = try db.cachedStatement(sql: "SELECT \(ObjectRow.columns) FROM objects WHERE key_hash = ?")
        return try Row.fetchOne(statement, arguments: [keyHash]).map(ObjectRow.init(row:))
    }

    static func upsert(_ db: Database, _ row: ObjectRow) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT OR REPLACE INTO objects (\(ObjectRow.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        try statement.execute(arguments: row.arguments)
    }

    static func delete(_ db: Database, keyHashes: [String]) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM objects WHERE key_hash = ?")
        for hash in keyHashes {
            try statement.execute(arguments: [hash])
        }
    }

    static func usage(_ db: Database) throws -> (bytes: Int64, count: Int) {
        let row = try Row.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) AS bytes, COUNT(*) AS n FROM objects")
        return (row?["bytes"] ?? 0, row?["n"] ?? 0)
    }

    /// Eviction candidates, best first: expired objects, then least recently used. Locked rows never appear.
    static func evictionCandidates(_ db: Database, now: Double) throws -> RowCursor {
        try Row.fetchCursor(
            db,
            sql: """
                SELECT key_hash, key, size FROM objects WHERE locked = 0
                ORDER BY (expires_at IS NOT NULL AND expires_at <= ?) DESC, last_access ASC
                """,
            arguments: [now])
    }
}
