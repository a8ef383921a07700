import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOConcurrencyHelpers
import NIOCore
import Synchronization

extension Downloader {
    /// How many times ``fetchShared(_:for:counter:)`` looks for the proxy's copy (waiting a little longer each time,
    /// 1.5 s in all) before storing a segment itself.
    static let sharedAttempts = 6

    /// A recording's segment or init section under `serve` (``liveShare``): asked for through the server's own proxy,
    /// which stores it — joining a viewer's fetch of it, or answering from the cache — while this side only reads the
    /// answer through. Storing it here too would make two writers of one object, and a viewer asking while one
    /// replaces the other's version would find neither and fetch it from the origin again. `nil` when not shared,
    /// or when the proxy did not store it (``sharedAttempts``): the caller stores it itself
    /// (``fetchResource(_:for:counter:)``, through the proxy too). The bytes read here are the proxy's, not counted as
    /// this item's origin volume.
    /// - Returns: the stored object's size.
    func fetchShared(_ resource: PlannedResource, for item: DownloadItem) async throws -> Int64? {
        guard resource.slice == nil, item.headers.isEmpty, throughServer(of: item) == nil,
            let (server, client) = liveShare,
            let target = try? OriginURL(server + resource.url.proxyPath)
        else { return nil }
        try await withRetries(resource.url) {
            let handler = DiscardingHandler(eventLoop: self.eventLoopGroup.next())
            let task = client.stream(target, headers: [], on: handler.eventLoop, handler: handler)
            try await withTaskCancellationHandler {
                try await handler.promise.futureResult.get()
            } onCancel: {
                task.cancel()
            }
        }
        // The proxy commits a body once it is on disk, just after its answer ends.
        for attempt in 1..<Self.sharedAttempts {
            if let object = store.lookup(resource.key) { return object.size }
            try await Task.sleep(for: .milliseconds(100 * attempt))
        }
        return store.lookup(resource.key)?.size
    }
}

/// Reads a response through without keeping it; fails on a status other than 200.
private final class DiscardingHandler: OriginStreamHandler {
    let eventLoop: any EventLoop
    let promise: EventLoopPromise<Void>
    /// The response's status; 0 until its head arrives. One value on its own: an atomic, no lock.
    private let status = Atomic<Int>(0)

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        self.promise = eventLoop.makePromise()
    }

    func didReceiveHead(_ head: OriginResponseHead) {
        status.store(head.status, ordering: .releasing)
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        eventLoop.makeSucceededVoidFuture()
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        switch result {
        case .success:
            let code = status.load(ordering: .acquiring)
            if code == 200 { promise.succeed() } else { promise.fail(OriginError.httpStatus(code)) }
        case .failure(let error):
            promise.fail(error)
        }
    }
}
