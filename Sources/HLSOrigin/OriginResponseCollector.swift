import NIOCore

/// The stream handler behind `OriginClient.fetch`: gathers the body up to a limit. A body over the limit
/// (announced by Content-Length or counted) fails the next chunk's future, which aborts the request with
/// `tooLarge` without reading the rest. All calls arrive on `eventLoop` and the state is only touched there,
/// hence the unchecked Sendable.
final class OriginResponseCollector: OriginStreamHandler, @unchecked Sendable {
    private let maxBytes: Int
    private let eventLoop: any EventLoop
    private let promise: EventLoopPromise<OriginResponse>
    private var head: OriginResponseHead?
    private var body = ByteBuffer()
    private var tooLarge = false

    init(maxBytes: Int, eventLoop: any EventLoop) {
        self.maxBytes = maxBytes
        self.eventLoop = eventLoop
        self.promise = eventLoop.makePromise()
    }

    /// The response once the request finished.
    var futureResponse: EventLoopFuture<OriginResponse> { promise.futureResult }

    func didReceiveHead(_ head: OriginResponseHead) {
        self.head = head
        if let length = head.contentLength, length > maxBytes { tooLarge = true }
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        if !tooLarge && body.readableBytes + buffer.readableBytes > maxBytes { tooLarge = true }
        guard !tooLarge else {
            return eventLoop.makeFailedFuture(OriginError.tooLarge.with("more than \(maxBytes) bytes"))
        }
        var buffer = buffer
        body.writeBuffer(&buffer)
        return eventLoop.makeSucceededVoidFuture()
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        switch result {
        case .success where tooLarge:
            promise.fail(OriginError.tooLarge.with("more than \(maxBytes) bytes"))
        case .success:
            if let head {
                promise.succeed(OriginResponse(head: head, body: body))
            } else {
                promise.fail(OriginError.network.with("no response"))
            }
        case .failure(let error):
            promise.fail(tooLarge ? OriginError.tooLarge.with("more than \(maxBytes) bytes") : error)
        }
    }
}
