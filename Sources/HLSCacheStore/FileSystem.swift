#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The few POSIX calls the store makes, with `EINTR` retried and failures turned into ``CacheStoreError``.
///
/// Plain syscalls rather than `FileManager`: the write path must map `ENOSPC` to `cacheFull` and must not
/// allocate per call.
enum FileSystem {
    static func error(_ call: String, _ path: String, _ code: Int32 = errno) -> CacheStoreError {
        if code == ENOSPC || code == EDQUOT {
            return CacheStoreError.cacheFull.with("\(call) \(path): no space left on device")
        }
        return CacheStoreError.io.with("\(call) \(path): \(String(cString: strerror(code))) (errno \(code))")
    }

    /// Debug builds stop when store work that waits on the disk (creating, writing or committing an object,
    /// eviction) is called on a SwiftNIO event-loop thread: it would stall every connection of that loop, cache hits
    /// included, for as long as the disk takes (seconds when the host is writing back). That work belongs on the
    /// thread pool. Release builds check nothing.
    static func assertMayBlock(_ what: @autoclosure () -> String) {
        #if DEBUG && os(Linux)
            var name = [CChar](repeating: 0, count: 32)
            if let getName = threadName, getName(pthread_self(), &name, name.count) == 0 {
                let thread = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                precondition(
                    !thread.hasPrefix("NIO-ELT-") && !thread.hasPrefix("NIO-SGLTN-"),
                    "\(what()) on event-loop thread \(thread): it waits on the disk")
            }
        #endif
    }

    #if DEBUG && os(Linux)
        /// `pthread_getname_np` (a GNU extension the Glibc module does not export), looked up by name.
        private static let threadName: (@convention(c) (pthread_t, UnsafeMutablePointer<CChar>, Int) -> Int32)? = {
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pthread_getname_np") else { return nil }
            return unsafeBitCast(symbol, to: (@convention(c) (pthread_t, UnsafeMutablePointer<CChar>, Int) -> Int32).self)
        }()
    #endif

    /// Creates `path` (one level) unless it exists as a directory.
    static func makeDirectory(_ path: String) throws {
        if mkdir(path, 0o755) == 0 { return }
        let code = errno
        guard code == EEXIST else { throw error("mkdir", path, code) }
        guard isDirectory(path) else {
            throw CacheStoreError.corrupted.with("\(path) exists and is not a directory")
        }
    }

    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// The size of a regular file, or `nil` when it does not exist or is not a regular file.
    static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// Bytes available to unprivileged users on the file system holding `path`.
    static func availableBytes(_ path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_bavail) * Int64(info.f_frsize)
    }

    /// The size of the file system holding `path` (`statvfs`: blocks × fragment size); nil when it cannot be read.
    static func totalBytes(_ path: String) -> Int64? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int64(info.f_blocks) * Int64(info.f_frsize)
    }

    /// Creates a new file exclusively for writing.
    static func createExclusive(_ path: String) throws -> Int32 {
        while true {
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if fd >= 0 { return fd }
            if errno == EINTR { continue }
            throw error("open", path)
        }
    }

    /// Writes all of `buffer`, retrying short writes and `EINTR`.
    static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws {
        guard var base = buffer.baseAddress else { return }
        var remaining = buffer.count
        while remaining > 0 {
            let n = write(fd, base, remaining)
            if n < 0 {
                if errno == EINTR { continue }
                throw error("write", path)
            }
            base += n
            remaining -= n
        }
    }

    /// Writes all of `parts` in order with `writev` (at most `IOV_MAX` at a time), retrying short writes and `EINTR`.
    static func writeAll(_ fd: Int32, _ parts: [UnsafeRawBufferPointer], path: String) throws {
        var vectors = parts.filter { $0.count > 0 }.map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
        }
        var first = 0
        while first < vectors.count {
            let batch = min(vectors.count - first, 1024)
            let n = vectors.withUnsafeMutableBufferPointer { writev(fd, $0.baseAddress! + first, Int32(batch)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw error("writev", path)
            }
            // Skips what was written: whole vectors, then the written part of the next.
            var written = n
            while written > 0, first < vectors.count {
                if written >= vectors[first].iov_len {
                    written -= vectors[first].iov_len
                    first += 1
                } else {
                    vectors[first].iov_base += written
                    vectors[first].iov_len -= written
                    written = 0
                }
            }
        }
    }

    static func sync(_ fd: Int32, path: String) throws {
        while fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw error("fsync", path)
        }
    }

    /// Makes `path`'s own inode and directory entries durable (`fsync` of a file or a directory).
    static func syncPath(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw error("open", path) }
        defer { closeFile(fd) }
        try sync(fd, path: path)
    }

    static func closeFile(_ fd: Int32) {
        // close(2) must not be retried on EINTR on Linux: the descriptor is already released.
        _ = close(fd)
    }

    /// Atomically renames `from` over `to`.
    static func move(_ from: String, to: String) throws {
        guard rename(from, to) == 0 else { throw error("rename", to) }
    }

    /// Removes a file; a missing file is not an error.
    @discardableResult
    static func remove(_ path: String) -> Bool {
        unlink(path) == 0 || errno == ENOENT
    }

    /// Names in a directory, without `.` and `..`; empty when it cannot be read.
    static func contents(of path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Removes a file, or a directory and everything below it.
    static func removeTree(_ path: String) {
        if isDirectory(path) {
            for name in contents(of: path) { removeTree(path + "/" + name) }
            _ = rmdir(path)
        } else {
            _ = unlink(path)
        }
    }

    /// Whether a process with this id exists (it may belong to another user).
    static func processExists(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0 || errno == EPERM
    }
}

extension FileSystem {
    /// Takes an `flock(2)` on `fd`; `exclusive` and `wait` as named. Returns whether it was granted.
    static func lock(_ fd: Int32, exclusive: Bool, wait: Bool) -> Bool {
        let operation = (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB)
        while flock(fd, operation) != 0 {
            if errno == EINTR { continue }
            return false
        }
        return true
    }

    static func unlock(_ fd: Int32) {
        _ = flock(fd, LOCK_UN)
    }

    /// Opens (creating) a file used only for locks.
    static func openLockFile(_ path: String) throws -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw error("open", path) }
        return fd
    }
}
