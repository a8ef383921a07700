import Foundation
import GRDB

extension CacheStore {
    /// Startup recovery: makes the files and the index agree again after a crash.
    ///
    /// Always (safe while another process uses the directory): remove temp files whose writer process is gone.
    /// The full pass runs only when `full` (the caller is alone and a previous process did not close the store, or
    /// the directory predates session files): drop rows whose file is missing or has the wrong size — a row is only
    /// ever written after its file is complete, so such a row is damage, not a write in flight — remove every temp
    /// file and every object file no row names, and recount the totals.
    ///
    /// A cleanly closed cache skips the full pass, so opening it costs the same with 50 objects or 500,000. Damage
    /// done by hand between runs is still never served: the first lookup of an object in a process checks its
    /// file's size (``lookup(_:)``), and a mismatch is a miss that refetches and replaces it.
    static func recover(
        index: IndexDatabase,
        objectsDirectory: String,
        tmpDirectory: String,
        exclusive: Bool,
        full: Bool
    ) throws -> CacheRecoveryReport {
        var report = CacheRecoveryReport()
        report.exclusive = exclusive
        report.full = full

        for name in FileSystem.contents(of: tmpDirectory) {
            if exclusive || !writerIsAlive(tempName: name) {
                FileSystem.removeTree(tmpDirectory + "/" + name)
                report.tempFilesRemoved += 1
            }
        }
        guard full else {
            report.objectCount = try index.read(IndexDatabase.usage).count
            return report
        }

        // Only the two columns the check needs, streamed: no row objects for a cache of any size.
        var known = Set<String>()
        var broken: [String] = []
        try index.read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT key_hash, size FROM objects")
            while let row = try rows.next() {
                let hash: String = row[0]
                let size: Int64 = row[1]
                let path = "\(objectsDirectory)/\(hash.prefix(2))/\(hash.dropFirst(2))"
                if isValidHash(hash), FileSystem.fileSize(path) == size {
                    known.insert(hash)
                } else {
                    broken.append(hash)
                    if isValidHash(hash) { FileSystem.remove(path) }
                }
            }
        }
        try index.write { db in
            if !broken.isEmpty { try IndexDatabase.delete(db, keyHashes: broken) }
            report.totalsRecounted = try IndexDatabase.recount(db)
        }
        report.rowsDropped = broken.count

        for prefix in FileSystem.contents(of: objectsDirectory) {
            let folder = objectsDirectory + "/" + prefix
            guard prefix.utf8.count == 2, FileSystem.isDirectory(folder) else {
                FileSystem.removeTree(folder)
                report.orphanFilesRemoved += 1
                continue
            }
            for name in FileSystem.contents(of: folder) where !known.contains(prefix + name) {
                FileSystem.removeTree(folder + "/" + name)
                report.orphanFilesRemoved += 1
            }
        }
        report.objectCount = known.count
        return report
    }

    /// Temp files are named `<hash>.<pid>.<n>.tmp`; a name that does not parse belongs to nobody.
    private static func writerIsAlive(tempName: String) -> Bool {
        let parts = tempName.split(separator: ".")
        guard parts.count == 4, parts[3] == "tmp", let pid = Int32(parts[1]) else { return false }
        return FileSystem.processExists(pid)
    }

    static func isValidHash(_ hash: String) -> Bool {
        hash.utf8.count == 64 && hash.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
