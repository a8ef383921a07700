import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Streams one origin response into a ``CacheWriter``: chunks are written on the thread pool (after the rate
/// limiter lets them through) before the next one is read, so memory stays at one chunk per resource. The
/// object is committed only when the origin finished with exactly the announced length; anything else aborts
/// the writer, leaving nothing behind.
final class StoreStreamHandler: OriginStreamHandler {
    private struct State {
        var writer: CacheWriter?
        var head: OriginResponseHead?
        var failure: (any Error)?
        /// The last chunk's write, which may still run on the thread pool when the request dies.
        var pendingBody: EventLoopFuture<Void>?
    }

    private let store: CacheStore
    private let key: CacheKey
    private let kind: CacheObjectKind
    private let locked: Bool
    private let threadPool: NIOThreadPool
    private let limiter: RateLimiter?
    private let onBytes: @Sendable (Int) -> Void
    private let state = NIOLockedValueBox(State())
    private let promise: EventLoopPromise<CachedObject>

    /// Completes with the committed object, or fails with the `OriginError`, `CacheStoreError` or
    /// ``DownloadError`` that ended the transfer.
    var futureResult: EventLoopFuture<CachedObject> { promise.futureResult }

    init(
        store: CacheStore, key: CacheKey, kind: CacheObjectKind, locked: Bool, threadPool: NIOThreadPool, limiter: RateLimiter?,
        eventLoop: any EventLoop, onBytes: @escaping @Sendable (Int) -> Void
    ) {
        self.store = store
        self.key = key
        self.kind = kind
        self.locked = locked
        self.threadPool = threadPool
        self.limiter = limiter
        self.onBytes = onBytes
        promise = eventLoop.makePromise()
    }

    func didReceiveHead(_ head: OriginResponseHead) {
        state.withLockedValue { $0.head = head }
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let eventLoop = promise.futureResult.eventLoop
        guard let head = state.withLockedValue({ $0.head }), head.status == 200 else {
            // An error status: its body is not the resource; didFinish reports the status.
            return eventLoop.makeSucceededVoidFuture()
        }
        let future = eventLoop.makeFutureWithTask { [self] in
            if let limiter { try await limiter.acquire(buffer.readableBytes) }
            try await threadPool.runIfActive { [self] in
                let writer = try writerForHead(head)
                try buffer.withUnsafeReadableBytes { try writer.write($0) }
            }
            onBytes(buffer.readableBytes)
        }.flatMapErrorThrowing { [self] error in
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
            guard head.status == 200 else {
                promise.fail(OriginError.httpStatus(head.status))
                return
            }
            let contentType = head.headers.first(name: "Content-Type")
            promise.completeWithTask { [self] in
                try await threadPool.runIfActive { [self] in
                    // The body may have been empty: no chunk created the writer.
                    let writer = try writerForHead(head)
                    return try writer.finish(contentType: contentType, kind: kind, locked: locked)
                }
            }
        }
    }

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
