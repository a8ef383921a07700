import Foundation
import HLSCacheCore
import Synchronization

/// Writes one object into `tmp/` and commits it into the cache with
/// ``finish(contentType:kind:etag:lastModified:expiresAt:locked:location:tokens:slice:)``.
///
/// Until `finish` returns, lookups do not see the object. ``abort()`` may be called from any thread at any
/// time (a client went away, the origin failed); a writer dropped without `finish` cleans up in `deinit`.
/// Writes are plain blocking `write(2)` calls: call them off the event loop (NIO's thread pool).
package final class CacheWriter: Sendable {
    /// The key being written.
    package let key: CacheKey
    /// The announced length, enforced at finish.
    package let expectedLength: Int64?

    private let store: CacheStore
    private let keyHash: String
    private let tempPath: String
    private let state: Mutex<WriterState>

    private struct WriterState: Sendable {
        var fileDescriptor: Int32?
        var written: Int64 = 0
        var reservation: Int64
        /// The next total at which the free-disk cushion is checked again when no length was announced.
        var nextSpaceCheck: Int64 = CacheWriter.spaceCheckInterval
    }

    private static let spaceCheckInterval: Int64 = 8 * 1024 * 1024

    init(
        store: CacheStore, key: CacheKey, keyHash: String, expectedLength: Int64?, tempPath: String,
        fileDescriptor: Int32, reservation: Int64
    ) {
        self.store = store
        self.key = key
        self.keyHash = keyHash
        self.expectedLength = expectedLength
        self.tempPath = tempPath
        state = Mutex(WriterState(fileDescriptor: fileDescriptor, reservation: reservation))
    }

    deinit {
        abort()
    }

    /// Bytes written so far.
    package var bytesWritten: Int64 {
        state.withLock { $0.written }
    }

    /// Whether the writer still accepts bytes (not finished, not aborted, no failed write).
    package var isOpen: Bool {
        state.withLock { $0.fileDescriptor != nil }
    }

    /// A new read-only descriptor of the temp file, for a reader that follows the write (the proxy's clients that
    /// are behind its memory window); the caller closes it. It stays valid after ``finish(contentType:kind:etag:lastModified:expiresAt:locked:location:tokens:slice:)``
    /// renames the file and after ``abort()`` removes it. Nil when the writer is closed or the file cannot be opened.
    package func openReader() -> Int32? {
        state.withLock { state -> Int32? in
            guard state.fileDescriptor != nil else { return nil }
            let descriptor = open(tempPath, O_RDONLY | O_CLOEXEC)
            return descriptor >= 0 ? descriptor : nil
        }
    }

    /// Appends `bytes` to the temp file.
    ///
    /// - Throws: ``CacheStoreError/cacheFull`` on `ENOSPC`, when the object grows past the cap, or (without
    ///   an announced length) when the free-disk cushion is reached; ``CacheStoreError/lengthMismatch`` when
    ///   it grows past the announced length; ``CacheStoreError/io``; ``CacheStoreError/writerClosed``.
    ///   After any error the writer is aborted and its temp file is gone.
    package func write(_ bytes: UnsafeRawBufferPointer) throws {
        FileSystem.assertMayBlock("CacheWriter.write(\(key))")
        try state.withLock { state in
            guard let fd = state.fileDescriptor else {
                throw CacheStoreError.writerClosed.with("write after finish or abort of \(key)")
            }
            do {
                try checkGrowth(by: bytes.count, &state)
                try FileSystem.writeAll(fd, bytes, path: tempPath)
                state.written += Int64(bytes.count)
            } catch {
                discard(&state)
                throw error
            }
        }
    }

    /// Throws when `count` more bytes would pass the announced length, the cache's cap or (without an announced length)
    /// the free-disk cushion.
    private func checkGrowth(by count: Int, _ state: inout WriterState) throws {
        let total = state.written + Int64(count)
        if let expectedLength, total > expectedLength {
            throw CacheStoreError.lengthMismatch.with("\(key): more than the announced \(expectedLength) bytes")
        }
        if total > store.maxBytes {
            throw CacheStoreError.cacheFull.with("\(key) grows past the cache size cap of \(store.maxBytes)")
        }
        if expectedLength == nil, total >= state.nextSpaceCheck {
            state.nextSpaceCheck = total + Self.spaceCheckInterval
            if let available = FileSystem.availableBytes(store.directory), available - Int64(count) < store.freeDiskCushion {
                throw CacheStoreError.cacheFull.with("\(key): the free-disk cushion is reached")
            }
        }
    }

    /// Appends `parts`, in order, with one `writev` (retried until all is written): the page cache then holds the
    /// file in folios as large as the write, which sendfile walks in fewer steps than one per small write (a 2 MiB hit
    /// written in 64 KiB appends cost 17 % of its CPU in `filemap_get_read_batch`, under 1 % written whole).
    ///
    /// Throws as ``write(_:)-(UnsafeRawBufferPointer)``.
    package func write(parts: [UnsafeRawBufferPointer]) throws {
        guard parts.count > 1 else {
            if let part = parts.first { try write(part) }
            return
        }
        FileSystem.assertMayBlock("CacheWriter.write(\(key))")
        let count = parts.reduce(0) { $0 + $1.count }
        try state.withLock { state in
            guard let fd = state.fileDescriptor else {
                throw CacheStoreError.writerClosed.with("write after finish or abort of \(key)")
            }
            do {
                try checkGrowth(by: count, &state)
                try FileSystem.writeAll(fd, parts, path: tempPath)
                state.written += Int64(count)
            } catch {
                discard(&state)
                throw error
            }
        }
    }

    /// Appends `bytes` (an `[UInt8]`, `Data`, or any contiguous bytes) to the temp file.
    ///
    /// Throws as ``write(_:)-(UnsafeRawBufferPointer)``.
    package func write(_ bytes: some ContiguousBytes) throws {
        try bytes.withUnsafeBytes { try write($0) }
    }

    /// Checks that the announced length was written, without committing: for a caller that commits later (the
    /// downloader commits off the path of its transfers) and wants a short body to fail — and be retried — now.
    ///
    /// - Throws: ``CacheStoreError/lengthMismatch`` (the writer is aborted, as `finish` would),
    ///   ``CacheStoreError/writerClosed`` after ``abort()``.
    package func checkLength() throws {
        try state.withLock { state in
            guard state.fileDescriptor != nil else {
                throw CacheStoreError.writerClosed.with("length check after abort of \(key)")
            }
            if let expectedLength, state.written != expectedLength {
                discard(&state)
                throw CacheStoreError.lengthMismatch.with(
                    "\(key): \(state.written) bytes written, \(expectedLength) announced")
            }
        }
    }

    /// Verifies the length, fsyncs, renames the file into `objects/` and records it in the index.
    ///
    /// - Parameters:
    ///   - etag: the validator to serve; `nil` derives a strong one (pass the origin's only when the stored
    ///     bytes are exactly the origin's).
    ///   - expiresAt: when lookups stop returning the object (live playlists, keys).
    ///   - locked: whether an item holds it (never evicted); a replaced version's lock carries over.
    ///   - location: the URL that answered, when the origin redirected (``CachedObject/location``).
    ///   - tokens: a digest of the tokens a playlist was fetched with (``CachedObject/tokens``).
    ///   - slice: for a slice of a large object, where it sits (``SliceLayout``); `etag` must then be the whole
    ///     object's validator. Committing it removes the slices of the same object stored with another validator
    ///     or object size (an older version), so two versions never sit side by side.
    /// - Returns: the committed object.
    /// - Throws: ``CacheStoreError/lengthMismatch`` when the byte count differs from the announced length,
    ///   ``CacheStoreError/writerClosed`` after ``abort()``, ``CacheStoreError/io`` or
    ///   ``CacheStoreError/cacheFull`` from fsync or rename, ``CacheStoreError/database``. On any error
    ///   nothing is left behind.
    package func finish(
        contentType: String?,
        kind: CacheObjectKind,
        etag: String? = nil,
        lastModified: Date? = nil,
        expiresAt: Date? = nil,
        locked: Bool = false,
        location: String? = nil,
        tokens: String? = nil,
        slice: ObjectSlice? = nil
    ) throws -> CachedObject {
        FileSystem.assertMayBlock("CacheWriter.finish(\(key))")
        let metadata = CacheStore.Metadata(
            contentType: contentType, kind: kind, etag: etag, lastModified: lastModified, expiresAt: expiresAt,
            locked: locked, location: location, tokens: tokens, slice: slice)
        // The lock is held to the end so an abort from another thread cannot remove the file mid-commit.
        let object = try state.withLock { state -> CachedObject in
            guard let fd = state.fileDescriptor else {
                throw CacheStoreError.writerClosed.with("finish after abort of \(key)")
            }
            if let expectedLength, state.written != expectedLength {
                discard(&state)
                throw CacheStoreError.lengthMismatch.with(
                    "\(key): \(state.written) bytes written, \(expectedLength) announced")
            }
            do {
                try FileSystem.sync(fd, path: tempPath)
            } catch {
                discard(&state)
                throw error
            }
            FileSystem.closeFile(fd)
            state.fileDescriptor = nil
            // The reservation goes before the row comes: for the moment between the two, a concurrent writer's room
            // check counts this object not at all rather than twice. Twice would evict other objects while the cache is
            // under its cap (an item's own first segments, mid-prewarm); not at all can take the cache over its cap by
            // this one object, which the check below evicts back down.
            store.releaseReservation(state.reservation)
            state.reservation = 0
            do {
                return try store.commit(
                    tempPath: tempPath, key: key, keyHash: keyHash, size: state.written, metadata: metadata)
            } catch {
                FileSystem.remove(tempPath)
                throw error
            }
        }
        // Over the cap now? Evict others, never the object just written (the caller is about to serve it).
        let pin = store.pin(key)
        defer { pin.unpin() }
        try? store.evictIfOverCap()
        return object
    }

    /// Stops writing and removes the temp file. Safe from any thread, any number of times; a no-op after
    /// a successful finish.
    package func abort() {
        state.withLock { state in discard(&state) }
    }

    private func discard(_ state: inout WriterState) {
        if let fd = state.fileDescriptor {
            FileSystem.closeFile(fd)
            FileSystem.remove(tempPath)
            state.fileDescriptor = nil
        }
        if state.reservation != 0 {
            store.releaseReservation(state.reservation)
            state.reservation = 0
        }
    }
}
