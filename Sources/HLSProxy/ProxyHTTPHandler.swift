#if canImport(Glibc)
import Glibc
#endif
import Logging
import NIOCore
import NIOHTTP1

/// One per client connection. Holds only its state machine and the request being answered; every decision
/// about the connection comes from ``ProxyConnectionStateMachine``.
final class ProxyHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private var state: ProxyConnectionStateMachine
    private var context: ChannelHandlerContext?
    private var responder: Responder?
    /// The body of the request being received (bounded by the state machine's limit).
    private var requestBody: ByteBuffer?
    private let router: ProxyRouter
    private let corsAllowOrigin: String?
    private let observer: ExchangeObserver?
    /// The server is shutting down: no keep-alive, close when idle.
    private var draining = false
    /// The timeout handler in front of the HTTP decoder, told directly (same channel, same event loop) where a
    /// request stands: a user event through the pipeline twice per request was a visible cost of a cache hit.
    private let timeouts: RequestHeadTimeoutHandler?

    init(
        router: ProxyRouter, configuration: ProxyConfiguration, observer: ExchangeObserver? = nil, timeouts: RequestHeadTimeoutHandler? = nil
    ) {
        self.router = router
        self.observer = observer
        self.timeouts = timeouts
        self.corsAllowOrigin = configuration.corsAllowOrigin
        self.state = ProxyConnectionStateMachine(maxHeaderCount: configuration.maxHeaderCount)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            timeouts?.requestHeadReceived()
            requestBody = nil
            run(state.receivedHead(head), context: context, head: head)
        case .body(var buffer):
            let action = state.receivedBody(count: buffer.readableBytes)
            if action == .none { _ = requestBody.setOrWriteBuffer(&buffer) }
            run(action, context: context, head: nil)
        case .end:
            run(state.receivedEnd(), context: context, head: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        state.channelClosed()
        let current = responder
        responder = nil
        current?.connectionClosed()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ServerDrainEvent else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        draining = true
        if state.isIdle { context.close(promise: nil) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Decoder errors (malformed request line, oversized headers) are answered by the
        // HTTPServerProtocolErrorHandler in front of us; anything else ends the connection.
        context.close(promise: nil)
    }

    private func run(_ action: ProxyConnectionStateMachine.Action, context: ChannelHandlerContext, head: HTTPRequestHead?) {
        switch action {
        case .none:
            break
        case .dispatch(let head, _):
            let request = ProxyRequest(head: head, remoteAddress: context.channel.remoteAddress, body: requestBody)
            requestBody = nil
            let responder = Responder(
                eventLoop: context.eventLoop, request: request, handler: self, corsAllowOrigin: corsAllowOrigin, observer: observer)
            self.responder = responder
            router.route(request, responder: responder)
        case .reject(let error):
            let request = ProxyRequest(head: head ?? HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), remoteAddress: nil)
            let responder = Responder(
                eventLoop: context.eventLoop, request: request, handler: self, corsAllowOrigin: corsAllowOrigin, observer: observer)
            self.responder = responder
            responder.send(error: error, extraHeaders: ["Connection": "close"])
        case .awaitNextRequest where draining:
            context.close(promise: nil)
        case .awaitNextRequest:
            timeouts?.responseCompleted()
        case .close:
            context.close(promise: nil)
        }
    }

    // MARK: - Writing (called by the Responder, on the event loop)

    private func responseHead(status: HTTPResponseStatus, headers: HTTPHeaders) -> HTTPResponseHead {
        var headers = headers
        if !state.responseKeepsAlive || draining {
            headers.replaceOrAdd(name: "Connection", value: "close")
        }
        return HTTPResponseHead(version: .http1_1, status: status, headers: headers)
    }

    func writeResponse(status: HTTPResponseStatus, headers: HTTPHeaders, body: ResponseBody, headOnly: Bool) {
        guard let context else {
            if case .file(let handle, _, _, let release) = body {
                try? handle.close()
                release()
            }
            return
        }
        context.write(wrapOutboundOut(.head(responseHead(status: status, headers: headers))), promise: nil)
        switch body {
        case .empty:
            break
        case .bytes(let buffer):
            if !headOnly { context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil) }
        case .file(let handle, let offset, let length, let release):
            if headOnly || length == 0 {
                try? handle.close()
                release()
            } else {
                let region = FileRegion(fileHandle: handle, readerIndex: Int(offset), endIndex: Int(offset + length))
                let written = context.eventLoop.makePromise(of: Void.self)
                written.futureResult.whenComplete { _ in
                    try? handle.close()
                    release()
                }
                context.write(wrapOutboundOut(.body(.fileRegion(region))), promise: written)
                // Corked, the head leaves in the same full-sized segments as the file's first bytes instead of a
                // small packet of its own (nginx's `tcp_nopush`); uncorking once sendfile has the data pushes the
                // tail out at once. About 10-15% more 2 MiB hits per second, but about 10% fewer 256 KiB ones, so
                // only large bodies are corked (docs/benchmarks.md).
                if length >= Self.corkThreshold {
                    Self.setCork(true, on: context.channel)
                    finishResponse(context: context)
                    Self.setCork(false, on: context.channel)
                    return
                }
            }
        }
        finishResponse(context: context)
    }

    /// Bodies at least this long are sent corked.
    static let corkThreshold: Int64 = 1 << 20

    #if os(Linux)
    private static let corkOption = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: CInt(TCP_CORK)))
    #endif

    /// Sets `TCP_CORK` (Linux only; a failure only costs the optimisation).
    private static func setCork(_ on: Bool, on channel: any Channel) {
        #if os(Linux)
        try? channel.syncOptions?.setOption(corkOption, value: on ? 1 : 0)
        #endif
    }

    func writeStreamHead(status: HTTPResponseStatus, headers: HTTPHeaders, headOnly: Bool) {
        guard let context else { return }
        context.writeAndFlush(wrapOutboundOut(.head(responseHead(status: status, headers: headers))), promise: nil)
    }

    func writeStreamBody(_ buffer: ByteBuffer, flush: Bool, eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        guard let context else { return eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
        if flush { return context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer)))) }
        return context.write(wrapOutboundOut(.body(.byteBuffer(buffer))))
    }

    func writeStreamEnd() {
        guard let context else { return }
        finishResponse(context: context)
    }

    func abortConnection() {
        responder = nil
        state.channelClosed()
        context?.close(promise: nil)
    }

    private func finishResponse(context: ChannelHandlerContext) {
        let done = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: done)
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        done.futureResult.whenComplete { result in
            let (handler, context) = bound.value
            handler.responseWritten(success: (try? result.get()) != nil, context: context)
        }
    }

    private func responseWritten(success: Bool, context: ChannelHandlerContext) {
        guard self.context != nil else { return }
        responder?.completed(success: success)
        responder = nil
        run(state.responseCompleted(success: success), context: context, head: nil)
    }
}
