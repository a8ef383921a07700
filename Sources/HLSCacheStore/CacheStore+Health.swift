import Foundation

extension CacheStore {
    /// Whether ``close()`` was called.
    public var isClosed: Bool { closed.withLock { $0 } }

    /// Checks what the server needs to keep caching, for `/readyz`: the store is open, the index answers a
    /// read, and a file can be created, written and removed in the temp directory.
    /// Blocking (SQLite read, file I/O): call it off the event loops.
    /// - Returns: nil when ready, otherwise why not.
    public func readinessProblem() -> String? {
        if isClosed { return "the cache store is closed" }
        do {
            _ = try usage()
        } catch {
            return "the cache index cannot be read: \(error)"
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
        } catch {
            return "the cache directory is not writable: \(error)"
        }
        return nil
    }
}
