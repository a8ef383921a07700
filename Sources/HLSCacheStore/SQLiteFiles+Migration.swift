import GRDB

extension SQLiteFiles {
    /// The file beside `databasePath` whose exclusive `flock(2)` serializes opening and migrating that database
    /// (`index.sqlite-migration.lock`, …). Empty; never removed.
    package static func migrationLockPath(for databasePath: String) -> String {
        databasePath + "-migration.lock"
    }

    /// Opens the WAL database at `path` and applies `migrator`'s pending migrations, holding an exclusive `flock(2)`
    /// on ``migrationLockPath(for:)`` meanwhile, so that processes (or threads with their own connections) opening
    /// one database at once migrate it one after the other.
    ///
    /// Without the lock, `DatabaseMigrator` reads which migrations are applied outside any transaction: two
    /// processes starting together on a fresh cache both saw none and both ran `v1`, and the second failed with
    /// `table "keys" already exists` or `duplicate column name: …` (a command exiting 6 `corrupted`). The lock is
    /// held only while opening and migrating — a few milliseconds once the schema is current — and is released when
    /// the process dies. The cache's own `lock` file cannot serve: every open store holds it shared.
    ///
    /// If the lock file cannot be created (a full file system that has no room for one more directory entry), the
    /// database is opened and migrated without it; the open then fails on its own for the same reason
    /// unless the schema is already current.
    /// - Throws: what `DatabasePool` and `DatabaseMigrator` throw.
    package static func openMigrated(path: String, configuration: Configuration, migrator: DatabaseMigrator) throws -> DatabasePool {
        let lock = try? FileSystem.openLockFile(migrationLockPath(for: path))
        if let lock { _ = FileSystem.lock(lock, exclusive: true, wait: true) }
        defer {
            if let lock {
                FileSystem.unlock(lock)
                FileSystem.closeFile(lock)
            }
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        try migrator.migrate(pool)
        return pool
    }
}
