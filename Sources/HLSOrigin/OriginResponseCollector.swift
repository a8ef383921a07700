import NIOCore

/// The stream handler behind `OriginClient.fetch`: gathers the body up to a limit. A body over the limit
/// (announced by Content-Length or counted) fails the next chunk's future, which aborts the request with
/// `tooLarge` without reading the rest. All calls arrive on `eventLoop`: the state is bound to it.
final class OriginResponseCollector: OriginStreamHandler {
    private let maxBytes: Int
    private let eventLoop: any EventLoop
    private let promise: EventLoopPromise<OriginResponse>

    private struct State {
        var head: OriginResponseHead?
        var body = ByteBuffer()
        var tooLarge = false
    }

    private let state: NIOLoopBoundBox<State>

    init(maxBytes: Int, eventLoop: any EventLoop) {
        self.maxBytes = maxBytes
        self.eventLoop = eventLoop
        self.promise = eventLoop.makePromise()
        state = NIOLoopBoundBox.makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// The response once the request finished.
    var futureResponse: EventLoopFuture<OriginResponse> { promise.futureResult }

    func didReceiveHead(_ head: OriginResponseHead) {
        state.value.head = head
        if let length = head.contentLength, length > maxBytes { state.value.tooLarge = true }
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        if !state.value.tooLarge && state.value.body.readableBytes + buffer.readableBytes > maxBytes { state.value.tooLarge = true }
        guard !state.value.tooLarge else {
            return eventLoop.makeFailedFuture(OriginError.tooLarge.with("more than \(maxBytes) bytes"))
        }
        var buffer = buffer
        state.value.body.writeBuffer(&buffer)
        return eventLoop.makeSucceededVoidFuture()
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        let (head, body, tooLarge) = (state.value.head, state.value.body, state.value.tooLarge)
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
