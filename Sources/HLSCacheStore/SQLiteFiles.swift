import Foundation
import GRDB
import GRDBSQLite
import HLSCacheCore

/// How hlscache opens its SQLite files (`index.sqlite`, `items.sqlite`, `keys.sqlite`): WAL databases shared
/// by `serve`, `fetch` and the item commands.
package enum SQLiteFiles {
    /// A configuration labelled `label` whose writes wait up to `busyTimeout` seconds for another process's.
    ///
    /// The WAL is persistent (`SQLITE_FCNTL_PERSIST_WAL`): the `-wal` and `-shm` files stay when the last
    /// connection closes, as GRDB advises for databases several processes share. Without it a database could not
    /// be opened at all, not even read, once its file system was full: opening a WAL database creates and sizes
    /// its `-shm` file, which fails with no free block ("disk I/O error"), so a restarted `serve` would refuse to
    /// start on a full disk instead of serving its hits.
    package static func configuration(label: String, busyTimeout: Double = 10) -> Configuration {
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.label = label
        configuration.prepareDatabase { db in
            var flag: CInt = 1
            let code = withUnsafeMutablePointer(to: &flag) { sqlite3_file_control(db.sqliteConnection, nil, SQLITE_FCNTL_PERSIST_WAL, $0) }
            guard code == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: code)) }
        }
        return configuration
    }

    /// Whether `error`, from a database in `directory`, means that its file system is full: SQLite's `SQLITE_FULL`,
    /// or an I/O error while no block is free (sizing a new `-shm` file fails as `SQLITE_IOERR_SHMSIZE`, for one).
    package static func isDiskFull(_ error: any Error, directory: String) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        if error.resultCode == .SQLITE_FULL { return true }
        return error.resultCode == .SQLITE_IOERR && isFileSystemFull(directory)
    }

    /// Whether less than 64 KiB is free (to this user) on the file system holding `directory`.
    package static func isFileSystemFull(_ directory: String) -> Bool {
        (FileSystem.availableBytes(directory) ?? .max) < 64 << 10
    }

    /// `the file system holding DIRECTORY is full (12 KiB free)`.
    package static func fullDisk(_ directory: String) -> String {
        let free = FileSystem.availableBytes(directory).map { " (\(ByteSize(bytes: max($0, 0))) free)" } ?? ""
        return "the file system holding \(directory) is full\(free)"
    }
}
