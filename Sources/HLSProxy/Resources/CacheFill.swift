import Foundation
import HLSCacheCore
import HLSCacheStore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Writes one origin response into the cache without ever blocking an event loop: creating the writer (which
/// may evict others: unlinks and an index transaction), appending the chunks in order and committing (fsync,
/// rename, index row) all run on the blocking thread pool, one step at a time.
///
/// The event loop only hands chunks over. They are the same buffers ``SharedFetch`` holds in its memory window
/// until ``Event/written(_:)`` says they are on disk, so trailing behind the network costs no memory of its own,
/// and the window paces the origin to the disk. Caching is best effort: when the writer cannot be made or a write
/// fails, the response is still served, just not stored, and nothing half-written is left.
///
/// Chunks are written ``coalesceBytes`` at a time, with one `writev` (``CacheWriter/write(parts:)``): the page cache then
/// keeps the file in large folios, which every later sendfile of it walks faster (a 2 MiB hit of a file written in
/// 64 KiB appends cost about a sixth more CPU). Whatever is pending is written at the commit, and at once when the
/// download waits for the disk (``flush()``: its memory window or the in-flight budget is full), so coalescing never
/// holds a download up.
///
/// A large object with a validator is stored as slices (``Slicing``): the same one body, cut at slice boundaries into
/// one writer per slice, each committed as soon as its last byte is written (the last, possibly short, at
/// ``commit(contentType:kind:etag:lastModified:expiresAt:completion:)``). A fill that stops keeps the slices it
/// committed: each is a whole slice of the announced version.
final class CacheFill: Sendable {
    /// How a large object is stored as slices (docs/architecture.md, "Slices").
    struct Slicing: Sendable {
        var layout: SliceLayout
        /// The object's validator (``SliceResponse/validator(strongETag:lastModified:total:)``), every slice's `etag`.
        var validator: String
        var objectSize: Int64
        var contentType: String?
        var lastModified: Date?
    }

    /// What the fill reports as it goes, from a thread-pool thread (or the caller of ``abort()``).
    enum Event: Sendable {
        /// The temp file exists (the first slice's, when sliced); what is written can be read through this file.
        case opened(any FetchFile)
        /// This many bytes of the body are written (readable through the descriptor).
        case written(Int64)
        /// Nothing more is written (the writer could not be made, a write failed, or ``abort()``).
        case stopped
    }

    private enum Step {
        case create
        case write([ByteBuffer])
        case commit(Commit)
        case stop
    }

    struct Commit: Sendable {
        var contentType: String?
        var kind: CacheObjectKind
        /// The origin's strong ETag, served with the object; nil: the store derives one.
        var etag: String?
        var lastModified: Date?
        var expiresAt: Date?
        var completion: @Sendable (CachedObject?) -> Void
    }

    private struct State {
        var writer: CacheWriter?
        /// Sliced: the slice ``writer`` writes.
        var sliceIndex: Int64 = 0
        /// Body bytes written so far (all slices).
        var written: Int64 = 0
        /// Chunks not handed to the writer yet, and their bytes.
        var pending: [ByteBuffer] = []
        var pendingBytes = 0
        /// Write what is pending now, however little (``flush()``).
        var flushRequested = false
        /// A job is on the thread pool (only one at a time: writes stay in order).
        var running = false
        /// Creating or writing failed, or ``abort()`` was called: nothing more is written.
        var stopped = false
        /// ``Event/stopped`` was reported.
        var reportedStop = false
        var commit: Commit?
    }

    private let store: CacheStore
    private let key: CacheKey
    private let expectedLength: Int64?
    private let threadPool: NIOThreadPool
    private let logger: Logger
    /// Told when the response cannot be stored (logged and counted in `/metrics`; without one, logged here).
    private let failed: @Sendable (any Error) -> Void
    private let events: (@Sendable (Event) -> Void)?
    /// The origin URL without its query, for log lines.
    private let label: String
    private let state = NIOLockedValueBox(State())
    /// Chunks are written once this many bytes are pending (0: each as it comes).
    let coalesceBytes: Int
    /// Set when the object is stored as slices, with the file its clients read the slices through.
    private let sliced: (slicing: Slicing, file: SlicedFile)?

    init(
        store: CacheStore, key: CacheKey, expectedLength: Int64?, slicing: Slicing? = nil, threadPool: NIOThreadPool, logger: Logger,
        label: String, coalesceBytes: Int = 0, failed: (@Sendable (any Error) -> Void)? = nil, events: (@Sendable (Event) -> Void)? = nil
    ) {
        self.store = store
        self.coalesceBytes = max(0, coalesceBytes)
        self.sliced = slicing.map { slicing in
            (
                slicing,
                SlicedFile(store: store, layout: slicing.layout, key: key, validator: slicing.validator, objectSize: slicing.objectSize)
            )
        }
        self.failed = failed ?? { [logger, label] error in logger.warning("not caching \(label): \(error)") }
        self.events = events
        self.key = key
        self.expectedLength = expectedLength
        self.threadPool = threadPool
        self.logger = logger
        self.label = label
        schedule()
    }

    /// Queues the next chunk of the body; it is written once ``coalesceBytes`` are pending.
    func append(_ buffer: ByteBuffer) {
        let start = state.withLockedValue { state -> Bool in
            guard !state.stopped else { return false }
            state.pending.append(buffer)
            state.pendingBytes += buffer.readableBytes
            return state.pendingBytes >= coalesceBytes && takeRun(&state)
        }
        if start { run() }
    }

    /// Writes what is pending now: the download waits for the disk.
    func flush() {
        let start = state.withLockedValue { state -> Bool in
            guard !state.stopped, !state.pending.isEmpty else { return false }
            state.flushRequested = true
            return takeRun(&state)
        }
        if start { run() }
    }

    /// The body is complete: commit once every chunk is written. `completion` gets the stored object, or nil when
    /// nothing was stored (the failure is logged); it runs on a thread-pool thread, or at once after an abort.
    /// - Parameters:
    ///   - etag: the origin's strong ETag (the stored bytes are exactly the origin's), or nil.
    ///   - expiresAt: when the object stops being served (a live playlist's segment), or nil.
    func commit(
        contentType: String?, kind: CacheObjectKind, etag: String? = nil, lastModified: Date?, expiresAt: Date? = nil,
        completion: @escaping @Sendable (CachedObject?) -> Void
    ) {
        let (start, stopped) = state.withLockedValue { state -> (Bool, Bool) in
            guard !state.stopped else { return (false, true) }
            state.commit = Commit(
                contentType: contentType, kind: kind, etag: etag, lastModified: lastModified, expiresAt: expiresAt,
                completion: completion)
            return (takeRun(&state), false)
        }
        if stopped {
            completion(nil)
        } else if start {
            run()
        }
    }

    /// Stops writing and removes the temp file; safe from any thread, at any time.
    func abort() {
        let (writer, commit, report) = state.withLockedValue { state -> (CacheWriter?, Commit?, Bool) in
            state.stopped = true
            state.pending.removeAll()
            defer { state.commit = nil }
            let report = !state.reportedStop
            state.reportedStop = true
            return (state.writer, state.commit, report)
        }
        // CacheWriter.abort is thread-safe, and cheap (close and unlink): it may run here.
        writer?.abort()
        commit?.completion(nil)
        if report { events?(.stopped) }
    }

    /// Claims the right to start a job (false when one is already running and will see the new work).
    private func takeRun(_ state: inout State) -> Bool {
        guard !state.running else { return false }
        state.running = true
        return true
    }

    private func schedule() {
        state.withLockedValue { $0.running = true }
        run()
    }

    private func run() {
        threadPool.submit { [self] poolState in
            guard case .active = poolState else {
                abort()
                state.withLockedValue { $0.running = false }
                return
            }
            drain()
        }
    }

    /// Runs steps until there is nothing to do; leaves `running` false when it returns.
    private func drain() {
        while true {
            switch nextStep() {
            case .stop:
                return
            case .create:
                do {
                    let writer = try makeWriter(slice: 0)
                    // Opened before anything is written, so every written byte is readable through it.
                    let reader = events == nil ? nil : writer.openReader().map { GrowingFile(descriptor: $0) }
                    if let reader, let sliced { sliced.file.began(0, reader) }
                    if events != nil && reader == nil {
                        writer.abort()
                        logger.warning("not caching \(label): its temp file cannot be opened for reading")
                        abort()
                        continue
                    }
                    let kept = state.withLockedValue { state -> Bool in
                        guard !state.stopped else { return false }
                        state.writer = writer
                        return true
                    }
                    if !kept {
                        writer.abort()
                    } else if let reader {
                        if let sliced { events?(.opened(sliced.file)) } else { events?(.opened(reader)) }
                    }
                } catch {
                    // Full disk or cap: keep serving, just do not cache (docs/design.md: serving continues). `failed` logs
                    // it: once, then counted (CacheWriteFailureLog), as every miss fails alike on a full disk.
                    failed(error)
                    abort()
                }
            case .write(let chunks):
                guard let writer = state.withLockedValue({ $0.writer }) else { continue }
                do {
                    if let sliced {
                        try writeSliced(chunks, sliced.slicing, sliced.file)
                    } else {
                        try Self.write(chunks[...], to: writer)
                        state.withLockedValue { $0.written = writer.bytesWritten }
                    }
                    events?(.written(state.withLockedValue { $0.written }))
                } catch {
                    // After an abort the writer is closed on purpose: nothing to report.
                    if !state.withLockedValue({ $0.stopped }) { failed(error) }
                    abort()
                }
            case .commit(let commit):
                let (writer, index) = state.withLockedValue { ($0.writer, $0.sliceIndex) }
                var stored: CachedObject?
                if let writer {
                    do {
                        if let sliced {
                            // The last slice (short unless the size is a multiple of the slice size).
                            stored = try finishSlice(writer, index: index, sliced.slicing, kind: commit.kind, expiresAt: commit.expiresAt)
                            sliced.file.committed(index)
                        } else {
                            stored = try writer.finish(
                                contentType: commit.contentType, kind: commit.kind, etag: commit.etag, lastModified: commit.lastModified,
                                expiresAt: commit.expiresAt)
                        }
                    } catch {
                        failed(error)
                    }
                }
                commit.completion(stored)
            }
        }
    }

    /// The writer of the whole object, or of slice `index` when sliced.
    private func makeWriter(slice index: Int64) throws -> CacheWriter {
        guard let slicing = sliced?.slicing else { return try store.makeWriter(for: key, expectedLength: expectedLength) }
        let bytes = slicing.layout.bytes(of: index, total: slicing.objectSize)
        return try store.makeWriter(for: slicing.layout.key(of: key, slice: index), expectedLength: bytes.last - bytes.first + 1)
    }

    private func finishSlice(
        _ writer: CacheWriter, index: Int64, _ slicing: Slicing, kind: CacheObjectKind = .segment, expiresAt: Date? = nil
    ) throws -> CachedObject {
        try writer.finish(
            contentType: slicing.contentType, kind: kind, etag: slicing.validator, lastModified: slicing.lastModified, expiresAt: expiresAt,
            slice: ObjectSlice(set: slicing.layout.setID(of: key), index: index, objectSize: slicing.objectSize))
    }

    /// Writes `chunks` into the slices they fall in: a slice whose last byte is written is committed at once (it
    /// becomes a hit for ranges, and evictable on its own), and the next one begins. The last slice is committed by
    /// ``commit(contentType:kind:etag:lastModified:expiresAt:completion:)``, after the origin's end.
    private func writeSliced(_ chunks: [ByteBuffer], _ slicing: Slicing, _ file: SlicedFile) throws {
        let count = slicing.layout.count(total: slicing.objectSize)
        // The pieces of the slice being written, written together (one writev) when it is full or the chunks end.
        var group: [ByteBuffer] = []
        var groupBytes: Int64 = 0
        var groupWriter: CacheWriter?
        func writeGroup() throws {
            guard let writer = groupWriter, !group.isEmpty else { return }
            try Self.write(group[...], to: writer)
            state.withLockedValue { [groupBytes] in $0.written += groupBytes }
            group.removeAll(keepingCapacity: true)
            groupBytes = 0
        }
        for var chunk in chunks {
            while chunk.readableBytes > 0 {
                let (current, index) = state.withLockedValue { ($0.writer, $0.sliceIndex) }
                guard let writer = current else { return }
                let bytes = slicing.layout.bytes(of: index, total: slicing.objectSize)
                if groupWriter !== writer {
                    try writeGroup()
                    groupWriter = writer
                }
                let room = bytes.last - bytes.first + 1 - writer.bytesWritten - groupBytes
                guard room > 0 else {
                    throw ProxyError.corrupted("origin \(label) sent more than the \(slicing.objectSize) bytes it announced")
                }
                let piece = chunk.readSlice(length: Int(min(room, Int64(chunk.readableBytes))))!
                group.append(piece)
                groupBytes += Int64(piece.readableBytes)
                guard Int64(piece.readableBytes) == room, index + 1 < count else { continue }
                try writeGroup()
                _ = try finishSlice(writer, index: index, slicing)
                file.committed(index)
                let next = try makeWriter(slice: index + 1)
                guard let descriptor = next.openReader() else {
                    next.abort()
                    throw ProxyError.unavailable("the temp file of a slice of \(label) cannot be opened for reading")
                }
                file.began(index + 1, GrowingFile(descriptor: descriptor))
                let kept = state.withLockedValue { state -> Bool in
                    guard !state.stopped else { return false }
                    state.writer = next
                    state.sliceIndex = index + 1
                    return true
                }
                if !kept {
                    next.abort()
                    return
                }
            }
        }
        try writeGroup()
    }

    /// Writes `chunks` with one `writev` (``CacheWriter/write(parts:)``).
    private static func write(_ chunks: ArraySlice<ByteBuffer>, to writer: CacheWriter, parts: [UnsafeRawBufferPointer] = []) throws {
        // Each buffer's bytes are addressable only inside its closure: nested, at most 64 deep, then written.
        guard let first = chunks.first, parts.count < 64 else {
            try writer.write(parts: parts)
            if !chunks.isEmpty { try write(chunks, to: writer) }
            return
        }
        try first.withUnsafeReadableBytes { bytes in
            try write(chunks.dropFirst(), to: writer, parts: parts + [bytes])
        }
    }

    private func nextStep() -> Step {
        state.withLockedValue { state -> Step in
            if state.stopped {
                state.running = false
                return .stop
            }
            if state.writer == nil { return .create }
            if !state.pending.isEmpty, state.pendingBytes >= coalesceBytes || state.flushRequested || state.commit != nil {
                defer {
                    state.pending.removeAll(keepingCapacity: true)
                    state.pendingBytes = 0
                    state.flushRequested = false
                }
                return .write(state.pending)
            }
            if let commit = state.commit {
                state.commit = nil
                state.stopped = true
                return .commit(commit)
            }
            state.running = false
            return .stop
        }
    }
}
