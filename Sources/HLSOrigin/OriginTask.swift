import AsyncHTTPClient
import NIOCore

/// One running origin request started by `OriginClient.stream`. Cancel it when nobody needs the bytes any
/// more; the handler then gets `didFinish(.failure(.cancelled))` unless it already finished.
package final class OriginTask: Sendable {
    /// The event loop all handler calls are made on.
    package let eventLoop: any EventLoop
    private let promise: EventLoopPromise<Void>
    /// Touched on ``eventLoop`` only: the request's driver, its exchange's delegate and the handler all run there, and
    /// ``cancel()`` from elsewhere hops to it.
    private let state: NIOLoopBoundBox<State>

    private struct State {
        var finished = false
        /// Aborts the HTTP exchange in flight (an AsyncHTTPClient task, or a raw exchange's channel).
        /// Or the step of the request under way: a slot wait, a backoff timer, a name resolution, a cookie refresh.
        var abortRequest: (@Sendable () -> Void)?
        /// Let go once `didFinish` is scheduled: handlers keep their task (to cancel it), and the pair would keep
        /// each other — and every body chunk the handler holds — alive forever (the soak's memory growth).
        var handler: (any OriginStreamHandler)?
    }

    init(eventLoop: any EventLoop, handler: any OriginStreamHandler) {
        self.eventLoop = eventLoop
        self.state = NIOLoopBoundBox.makeBoxSendingValue(State(handler: handler), eventLoop: eventLoop)
        self.promise = eventLoop.makePromise()
    }

    /// Completes after `didFinish` returned, with the same result; for callers that prefer a future.
    package var futureResult: EventLoopFuture<Void> { promise.futureResult }

    /// Aborts the request (connection, retry wait or redirect) and finishes with `.cancelled`. Safe from any
    /// thread, any number of times; a no-op once finished. Off the event loop it takes effect there, next.
    package func cancel() {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.cancel() }
            return
        }
        let abortRequest = state.value.finished ? nil : state.value.abortRequest
        finish(.failure(.cancelled))
        abortRequest?()
    }

    /// Whether the task finished (on the event loop).
    var isFinished: Bool { state.value.finished }

    /// Records the attempt in flight so `cancel` reaches it; cancels it at once if the task already finished.
    func attach(request: HTTPClient.Task<Void>) {
        attach(abort: { request.cancel() })
    }

    /// Records how to abort the exchange in flight so `cancel` reaches it; aborts it at once if the task already
    /// finished. Off the event loop it is recorded there.
    func attach(abort: @escaping @Sendable () -> Void) {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.attach(abort: abort) }
            return
        }
        if state.value.finished {
            abort()
        } else {
            state.value.abortRequest = abort
        }
    }

    /// The handler while the task runs; nil once finished.
    private var activeHandler: (any OriginStreamHandler)? {
        state.value.finished ? nil : state.value.handler
    }

    func deliverHead(_ head: OriginResponseHead) {
        eventLoop.preconditionInEventLoop()
        guard let handler = activeHandler else { return }
        handler.didReceiveHead(head)
    }

    func deliverBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        guard let handler = activeHandler else { return eventLoop.makeFailedFuture(OriginError.cancelled) }
        return handler.didReceiveBody(buffer).flatMapErrorThrowing { error in
            throw HandlerAbort(error: error)
        }
    }

    /// Marks an error that came from the handler's own future, so it is not mistaken for a network error.
    struct HandlerAbort: Error {
        var error: any Error
    }

    /// Finishes exactly once (on the event loop). `didFinish` always runs as a new event-loop task, so it never
    /// re-enters a handler that called `cancel()` and always follows any body callback already running.
    func finish(_ result: Result<Void, OriginError>) {
        eventLoop.preconditionInEventLoop()
        guard !state.value.finished, let handler = state.value.handler else { return }
        state.value.finished = true
        state.value.abortRequest = nil
        state.value.handler = nil
        eventLoop.execute { [promise] in
            handler.didFinish(result)
            promise.completeWith(result.mapError { $0 as any Error })
        }
    }
}
