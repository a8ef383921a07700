import Foundation
import GRDB

extension CacheStore {
    /// Startup recovery: makes the files and the index agree again after a crash.
    ///
    /// Always (safe while another process uses the directory): drop rows whose file is missing or has the
    /// wrong size — a row is only ever written after its file is complete, so such a row is damage, not a
    /// write in flight — and remove temp files whose writer process is gone.
    /// Only when `exclusive`: remove every temp file and every object file no row names (with another
    /// process active those may be its writes between rename and commit).
    static func recover(
        index: IndexDatabase,
        objectsDirectory: String,
        tmpDirectory: String,
        exclusive: Bool
    ) throws -> (CacheRecoveryReport, [ObjectRow]) {
        var report = CacheRecoveryReport()
        report.exclusive = exclusive

        for name in FileSystem.contents(of: tmpDirectory) {
            if exclusive || !writerIsAlive(tempName: name) {
                FileSystem.removeTree(tmpDirectory + "/" + name)
                report.tempFilesRemoved += 1
            }
        }

        let rows = try index.read(IndexDatabase.fetchAll)
        var kept: [ObjectRow] = []
        var broken: [String] = []
        for row in rows {
            let path = "\(objectsDirectory)/\(row.keyHash.prefix(2))/\(row.keyHash.dropFirst(2))"
            if isValidHash(row.keyHash), FileSystem.fileSize(path) == row.size {
                kept.append(row)
            } else {
                broken.append(row.keyHash)
                if isValidHash(row.keyHash) { FileSystem.remove(path) }
            }
        }
        if !broken.isEmpty {
            try index.write { db in try IndexDatabase.delete(db, keyHashes: broken) }
            report.rowsDropped = broken.count
        }

        if exclusive {
            let known = Set(kept.map(\.keyHash))
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
        }
        report.objectCount = kept.count
        return (report, kept)
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
