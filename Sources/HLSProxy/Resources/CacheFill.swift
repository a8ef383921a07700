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
final class CacheFill: Sendable {
    /// What the fill reports as it goes, from a thread-pool thread (or the caller of ``abort()``).
    enum Event: Sendable {
        /// The temp file exists; what is written can be read through this descriptor.
        case opened(GrowingFile)
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
        /// Chunks not handed to the writer yet.
        var pending: [ByteBuffer] = []
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

    init(
        store: CacheStore, key: CacheKey, expectedLength: Int64?, threadPool: NIOThreadPool, logger: Logger, label: String,
        failed: (@Sendable (any Error) -> Void)? = nil, events: (@Sendable (Event) -> Void)? = nil
    ) {
        self.store = store
        self.failed = failed ?? { [logger, label] error in logger.warning("not caching \(label): \(error)") }
        self.events = events
        self.key = key
        self.expectedLength = expectedLength
        self.threadPool = threadPool
        self.logger = logger
        self.label = label
        schedule()
    }

    /// Queues the next chunk of the body.
    func append(_ buffer: ByteBuffer) {
        let start = state.withLockedValue { state -> Bool in
            guard !state.stopped else { return false }
            state.pending.append(buffer)
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
                    let writer = try store.makeWriter(for: key, expectedLength: expectedLength)
                    // Opened before anything is written, so every written byte is readable through it.
                    let reader = events == nil ? nil : writer.openReader().map { GrowingFile(descriptor: $0) }
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
                        events?(.opened(reader))
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
                    for chunk in chunks { try chunk.withUnsafeReadableBytes { try writer.write($0) } }
                    events?(.written(writer.bytesWritten))
                } catch {
                    // After an abort the writer is closed on purpose: nothing to report.
                    if !state.withLockedValue({ $0.stopped }) { failed(error) }
                    abort()
                }
            case .commit(let commit):
                let writer = state.withLockedValue { $0.writer }
                var stored: CachedObject?
                if let writer {
                    do {
                        stored = try writer.finish(
                            contentType: commit.contentType, kind: commit.kind, etag: commit.etag, lastModified: commit.lastModified,
                            expiresAt: commit.expiresAt)
                    } catch {
                        failed(error)
                    }
                }
                commit.completion(stored)
            }
        }
    }

    private func nextStep() -> Step {
        state.withLockedValue { state -> Step in
            if state.stopped {
                state.running = false
                return .stop
            }
            if state.writer == nil { return .create }
            if !state.pending.isEmpty {
                defer { state.pending.removeAll(keepingCapacity: true) }
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
