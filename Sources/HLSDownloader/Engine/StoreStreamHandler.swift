import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A body written whole into its cache writer's temp file, its length checked, not yet committed.
///
/// The downloader commits it (``commit()``: fsync, rename, index row) on its commit threads, off the path of the
/// transfers: the next resource's transfer does not wait for this one's fsync. Dropped without a commit, the
/// writer's `deinit` removes the temp file.
struct WrittenBody: Sendable {
    let writer: CacheWriter
    let contentType: String?
    let kind: CacheObjectKind
    let locked: Bool
    /// The origin's strong ETag (the stored bytes are exactly the origin's), served with the object as `serve`'s
    /// own misses store it; nil: the store derives one.
    var etag: String? = nil
    /// For a slice of a large file: where it sits (``etag`` is then the whole file's validator).
    var slice: ObjectSlice? = nil

    /// Makes the object durable and visible (on an error `finish` leaves nothing behind). Blocking: call it on a
    /// thread pool.
    func commit() throws -> CachedObject {
        try writer.finish(contentType: contentType, kind: kind, etag: etag, locked: locked, slice: slice)
    }
}

/// Streams one origin response into a ``CacheWriter``: chunks are gathered up to 256 KiB and each batch is
/// written on the thread pool (after the rate limiter lets it through) before more is read, so memory stays at one
/// batch per resource. The result is a ``WrittenBody`` only when the origin finished with exactly the announced
/// length; anything else aborts the writer, leaving nothing behind.
///
/// Batching and going straight to the thread pool (not through a Swift task, unless a rate limit has to be
/// awaited) cut the thread hops of a prewarm from four per origin read (often 16 KiB) to two per batch; the last
/// batch is written and the length checked in one thread-pool job, so a body smaller than a batch (most segments)
/// costs one job on the transfer's path. The commit is the caller's (``WrittenBody/commit()``).
final class StoreStreamHandler: OriginStreamHandler {
    private struct State {
        var writer: CacheWriter?
        var head: OriginResponseHead?
        var failure: (any Error)?
        /// The last batch's write, which may still run on the thread pool when the request dies.
        var pendingBody: EventLoopFuture<Void>?
        /// Bytes received and not yet handed to the thread pool (less than a batch).
        var gathered: ByteBuffer?
        /// The last batch's wait for the rate limiter and write, cancelled by ``cancel()``.
        var pacing: Task<Void, any Error>?
        /// Set by ``cancel()``: a batch that comes later is not waited for.
        var cancelled = false
    }

    /// Bytes gathered before a write.
    static let batchSize = 256 * 1024
    /// This handler's batch: ``batchSize``, or under a rate limit an eighth of a second of it (at least 16 KiB), so
    /// that the pacing stays smooth.
    private let batchLimit: Int

    private let store: CacheStore
    private let key: CacheKey
    private let kind: CacheObjectKind
    private let locked: Bool
    private let threadPool: NIOThreadPool
    private let limiter: RateLimiter?
    private let onBytes: @Sendable (Int) -> Void
    /// For a slice (a `Range` request): the answer must be a `206` for exactly its bytes, with a validator.
    private let slice: PlannedResource.Slice?
    private let state = NIOLockedValueBox(State())
    private let promise: EventLoopPromise<WrittenBody>

    /// Completes with the written body (to be committed), or fails with the `OriginError`, `CacheStoreError` or
    /// ``DownloadError`` that ended the transfer.
    var futureResult: EventLoopFuture<WrittenBody> { promise.futureResult }

    init(
        store: CacheStore, key: CacheKey, kind: CacheObjectKind, locked: Bool, threadPool: NIOThreadPool, limiter: RateLimiter?,
        eventLoop: any EventLoop, slice: PlannedResource.Slice? = nil, onBytes: @escaping @Sendable (Int) -> Void
    ) {
        self.slice = slice
        self.store = store
        self.key = key
        self.kind = kind
        self.locked = locked
        self.threadPool = threadPool
        self.limiter = limiter
        self.onBytes = onBytes
        batchLimit = limiter.map { Int(min(Int64(Self.batchSize), max(16 * 1024, $0.bytesPerSecond / 8))) } ?? Self.batchSize
        promise = eventLoop.makePromise()
    }

    func didReceiveHead(_ head: OriginResponseHead) {
        state.withLockedValue { $0.head = head }
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let eventLoop = promise.futureResult.eventLoop
        guard let head = state.withLockedValue({ $0.head }), head.status == expectedStatus else {
            // An error status: its body is not the resource; didFinish reports the status.
            return eventLoop.makeSucceededVoidFuture()
        }
        let batch = state.withLockedValue { state -> ByteBuffer? in
            var incoming = buffer
            if state.gathered == nil, incoming.readableBytes >= batchLimit { return incoming }
            state.gathered.setOrWriteBuffer(&incoming)
            guard let gathered = state.gathered, gathered.readableBytes >= batchLimit else { return nil }
            state.gathered = nil
            return gathered
        }
        guard let batch else { return eventLoop.makeSucceededVoidFuture() }
        return write(batch, head: head, on: eventLoop)
    }

    /// Writes one batch on the thread pool; its future is the pace of the origin reads.
    private func write(_ batch: ByteBuffer, head: OriginResponseHead, on eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        let store: @Sendable () throws -> Void = { [self] in
            let writer = try writerForHead(head)
            try batch.withUnsafeReadableBytes { try writer.write($0) }
        }
        let written: EventLoopFuture<Void>
        if let limiter {
            // A task of its own, kept so that ``cancel()`` can end its wait: at a low rate the next bytes may be
            // many seconds away, and a pause must not wait for them.
            let pacing = Task { [threadPool] in
                try await limiter.acquire(batch.readableBytes)
                try await threadPool.runIfActive(store)
            }
            let cancelled = state.withLockedValue { state in
                state.pacing = pacing
                return state.cancelled
            }
            if cancelled { pacing.cancel() }
            written = eventLoop.makeFutureWithTask { try await pacing.value }
        } else {
            written = threadPool.runIfActive(eventLoop: eventLoop, store)
        }
        let future = written.map { [onBytes] in onBytes(batch.readableBytes) }.flatMapErrorThrowing { [self] error in
            state.withLockedValue { $0.failure = $0.failure ?? error }
            throw error
        }
        state.withLockedValue { $0.pendingBody = future }
        return future
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        // didFinish can arrive while a chunk is still being written: settle only after that write, so a
        // failed transfer never leaves a temp file behind once the caller has its answer.
        let pending = state.withLockedValue { $0.pendingBody } ?? promise.futureResult.eventLoop.makeSucceededVoidFuture()
        pending.whenComplete { [self] _ in settle(result) }
    }

    private func settle(_ result: Result<Void, OriginError>) {
        let (head, failure) = state.withLockedValue { ($0.head, $0.failure) }
        if let failure {
            abort()
            promise.fail(failure)
            return
        }
        switch result {
        case .failure(let error):
            abort()
            promise.fail(error)
        case .success:
            guard let head else {
                promise.fail(OriginError.network)
                return
            }
            guard head.status == expectedStatus else {
                if slice != nil, head.status == 200 {
                    promise.fail(
                        DownloadError.unsupported.with(
                            "\(head.url.redacted) ignores Range requests: a slice of a large file cannot be fetched (cache.sliceSize)"))
                } else {
                    promise.fail(OriginError.httpStatus(head))
                }
                return
            }
            let contentType = head.headers.first(name: "Content-Type")
            var etag = head.strongETag
            var placed: ObjectSlice?
            if let slice {
                let first = slice.index * slice.layout.sliceSize
                guard
                    let answer = SliceResponse(
                        contentRange: head.headers.first(name: "Content-Range"), strongETag: head.strongETag,
                        lastModified: head.headers.first(name: "Last-Modified")),
                    answer.first == first, answer.last == min(first + slice.layout.sliceSize, answer.total) - 1
                else {
                    abort()
                    promise.fail(
                        DownloadError.corrupted.with(
                            "\(head.url.redacted): the answer to a slice request names other bytes, or no ETag or Last-Modified tells its version"
                        ))
                    return
                }
                etag = answer.validator
                placed = ObjectSlice(set: slice.layout.setID(of: slice.objectKey), index: slice.index, objectSize: answer.total)
            }
            let placedSlice = placed
            let validator = etag
            let eventLoop = promise.futureResult.eventLoop
            let rest = state.withLockedValue { state in
                defer { state.gathered = nil }
                return state.gathered
            }
            let seal: @Sendable () throws -> WrittenBody = { [self] in
                // The body may have been empty: no batch created the writer.
                let writer = try writerForHead(head)
                try writer.checkLength()
                return WrittenBody(
                    writer: writer, contentType: contentType, kind: kind, locked: locked, etag: validator, slice: placedSlice)
            }
            let finished: EventLoopFuture<WrittenBody>
            if let rest, limiter == nil {
                // The last batch and the length check in one thread-pool job (for most segments, smaller than a
                // batch, the whole body: one hop per file).
                finished = threadPool.runIfActive(eventLoop: eventLoop) { [self] in
                    let writer = try writerForHead(head)
                    try rest.withUnsafeReadableBytes { try writer.write($0) }
                    onBytes(rest.readableBytes)
                    return try seal()
                }
            } else {
                let restWritten = rest.map { write($0, head: head, on: eventLoop) } ?? eventLoop.makeSucceededVoidFuture()
                finished = restWritten.flatMap { [threadPool] in threadPool.runIfActive(eventLoop: eventLoop, seal) }
            }
            finished.whenFailure { [self] _ in abort() }
            promise.completeWith(finished)
        }
    }

    /// Stops the transfer's wait for the rate limiter (the download was paused, removed or interrupted): the
    /// batch waiting for its turn fails with `CancellationError` at once instead of when its bytes are due, and
    /// so does any later one. Without a rate limit there is nothing to wait for; cancelling the origin request
    /// is enough.
    func cancel() {
        state.withLockedValue { state in
            state.cancelled = true
            return state.pacing
        }?.cancel()
    }

    private var expectedStatus: Int { slice == nil ? 200 : 206 }

    private func writerForHead(_ head: OriginResponseHead) throws -> CacheWriter {
        if let writer = state.withLockedValue({ $0.writer }) { return writer }
        let writer = try store.makeWriter(for: key, expectedLength: head.contentLength.map(Int64.init))
        state.withLockedValue { $0.writer = writer }
        return writer
    }

    private func abort() {
        state.withLockedValue { $0.writer }?.abort()
    }
}
