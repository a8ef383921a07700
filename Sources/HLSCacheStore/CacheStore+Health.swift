import Foundation
import HLSCacheCore

/// What `/readyz` says of the store.
package enum CacheReadiness: Sendable, Equatable {
    case ready
    /// Serving, not caching: the cache's file system is full. Hits are served and misses relayed uncached, so
    /// traffic should keep coming; the reason says why nothing new is stored.
    case degraded(String)
    /// Not fit to serve (closed, index unreadable, directory not writable for another reason than space).
    case unavailable(String)
}

extension CacheStore {
    /// Free bytes on the cache's file system (`statvfs`, as this user may use them); nil when it cannot be read.
    package func freeDiskBytes() -> Int64? { FileSystem.availableBytes(directory) }

    /// Whether ``close()`` was called.
    package var isClosed: Bool { state.withLock { $0.lifecycle.closed } }

    /// Checks what the server needs to keep caching, for `/readyz`: the store is open, the index answers a
    /// read, and a file can be created, written and removed in the temp directory. A write refused for want of
    /// space (`ENOSPC`, `EDQUOT`) is ``CacheReadiness/degraded(_:)``, not unavailable; a free-disk cushion as large as
    /// the file system itself (nothing could ever be stored: a configuration error) is unavailable.
    /// Blocking (SQLite read, file I/O): call it off the event loops.
    package func readiness() -> CacheReadiness {
        if isClosed { return .unavailable("the cache store is closed") }
        do {
            _ = try usage()
        } catch {
            return .unavailable("the cache index cannot be read: \(error)")
        }
        if let damage = index.damage.message {
            return .unavailable(
                "the cache index \(index.path) is damaged (\(damage)): lookups miss and nothing new is stored; stop the server and"
                    + " move index.sqlite, index.sqlite-wal and index.sqlite-shm aside (the next start begins an empty cache)")
        }
        if let total = FileSystem.totalBytes(directory), freeDiskCushion >= total {
            return .unavailable(
                "cache.freeDiskCushion (\(ByteSize(bytes: freeDiskCushion))) is not smaller than the whole file system holding \(directory)"
                    + " (\(ByteSize(bytes: total))): nothing can ever be cached; lower it")
        }
        let probe = "\(tmpDirectory)/readyz-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        do {
            let fd = try FileSystem.createExclusive(probe)
            defer {
                FileSystem.closeFile(fd)
                _ = FileSystem.remove(probe)
            }
            let byte: [UInt8] = [0]
            try byte.withUnsafeBytes { try FileSystem.writeAll(fd, $0, path: probe) }
        } catch let error as CacheStoreError where error == .cacheFull {
            return .degraded("\(SQLiteFiles.fullDisk(directory)): hits are served, misses are relayed without caching")
        } catch {
            return .unavailable("the cache directory is not writable: \(error)")
        }
        return .ready
    }
}
