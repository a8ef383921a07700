#if canImport(Glibc)
    import Glibc
#endif
import HLSCacheCore
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// One per client connection, right behind NIO's request decoder. Holds its state machine and the responder of the
/// request being answered, and runs what the machine decides: every decision about the connection (queueing
/// pipelined requests, reads, refusals, draining, keep-alive, framing) comes from ``ProxyConnectionStateMachine``.
/// It writes the response bytes itself (``ResponseEncoding``): NIO's pipelining and response-encoding handlers cost
/// a cache hit more than all they would do for it.
final class ProxyHTTPHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private var state: ProxyConnectionStateMachine
    private var context: ChannelHandlerContext?
    /// The channel's options, for `TCP_CORK` around large bodies (taken on the first; let go when the handler is removed).
    private var socketOptions: (any NIOSynchronousChannelOptions)?
    private var responder: Responder?
    private let router: ProxyRouter
    /// `http.allowedWebOrigins`, read for each request (a reload replaces it), and what this connection read of it last.
    private let liveWebOrigins: LiveWebOrigins
    private var lastWebOrigins: LiveWebOrigins.Read?
    private var webOrigins: WebOriginPolicy { liveWebOrigins.read(&lastWebOrigins) }
    private let observer: ExchangeObserver?
    /// The connection's timeouts (``ConnectionTimeoutHandler`` in front of the HTTP decoder), told directly (same
    /// channel, same event loop) where a request stands and how many response bytes were queued: a user event through
    /// the pipeline twice per request was a visible cost of a cache hit.
    private let timeouts: (any ConnectionTimeoutEvents)?
    /// Set while queued parts are being handed on (a response completing inside that loop must not start
    /// another one: every request of a long pipeline would nest a level deeper).
    private var delivering = false
    /// The decoder in front, told when a request that stops it (`Upgrade`) has ended.
    private let decoder: RequestDecoder?
    /// The `Date` line of this connection's event loop.
    private let date: DateLine?
    /// The configured listen host (an absolute-form target naming it is this server's).
    private let listenHost: String
    /// This event loop's requests answered without decoding (``ReplayedExchanges``).
    private let replays: ReplayedExchanges?
    /// Whether a large body sent on this connection counts in the memory tier.
    let largeSendHold: LargeSendHold
    /// This event loop's yield: bodies over ``sliceBytes`` are written a slice at a time between its other I/O.
    private let yield: LoopYield?
    /// ``ProxyConfiguration/sendSliceBytes`` (0: none).
    private let sliceBytes: Int
    /// ``ProxyConfiguration/bodyWriteObserver``.
    private let bodyWriteObserver: (@Sendable (String, Bool) -> Void)?
    /// ``ProxyConfiguration/directSendObserver``.
    private let directSendObserver: (@Sendable (String, Int64, Int64) -> Void)?
    /// ``ProxyConfiguration/drainFirstRequestWindow``.
    private let drainFirstRequestWindow: TimeAmount
    /// The index of this connection's event loop among the server's (where its requests are counted: ``ShardedCounts``).
    private let loopIndex: Int

    init(
        router: ProxyRouter, configuration: ProxyConfiguration, observer: ExchangeObserver? = nil,
        timeouts: (any ConnectionTimeoutEvents)? = nil,
        decoder: RequestDecoder? = nil, date: DateLine? = nil, replays: ReplayedExchanges? = nil, yield: LoopYield? = nil,
        webOrigins: LiveWebOrigins? = nil, loopIndex: Int = 0
    ) {
        self.loopIndex = loopIndex
        self.yield = yield
        self.largeSendHold = LargeSendHold(loop: yield)
        self.router = router
        self.observer = observer
        self.timeouts = timeouts
        self.decoder = decoder
        self.date = date
        self.replays = replays
        self.liveWebOrigins = webOrigins ?? LiveWebOrigins(configuration.webOrigins)
        self.listenHost = configuration.host
        self.bodyWriteObserver = configuration.bodyWriteObserver
        self.directSendObserver = configuration.directSendObserver
        self.drainFirstRequestWindow = configuration.drainFirstRequestWindow
        self.sliceBytes = configuration.sendSliceBytes
        self.state = ProxyConnectionStateMachine(maxHeaderCount: configuration.maxHeaderCount)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        yield?.connectionOpened()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        socketOptions = nil  // it holds the channel
        // The references back to this handler (strong: see RequestDecoder.replayer) are let go.
        decoder?.replayer = nil
        responder?.detach()
        yield?.connectionClosed()
        router.connectionEnded(largeSendHold)  // removed without the channel closing (an upgrade): the same (idempotent)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        decoder?.handedOn(part)
        state.enqueue(part)
        deliverQueued(context: context)
    }

    /// Hands queued request parts on, in order, until one starts a response (or the queue is empty).
    private func deliverQueued(context: ChannelHandlerContext) {
        guard !delivering else { return }
        delivering = true
        defer { delivering = false }
        while self.context != nil, let part = state.nextPart() {
            receive(part, context: context)
        }
        guard self.context != nil else { return }
        switch state.queueSettled() {
        case .none: break
        case .read: context.read()
        case .refuse(let action): run(action, context: context, head: nil)
        }
    }

    private func receive(_ part: HTTPServerRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(var head):
            // The head's bytes, when the decoder found them whole: remembered with the answer if it is a replayed hit
            // from memory.
            let candidate = decoder?.takeCandidate(headNumber: state.headsReceived + 1)
            if head.uri.utf8.first != UInt8(ascii: "/") {
                head = AbsoluteForm.originForm(of: head, local: context.channel.localAddress, listenHost: listenHost)
            }
            var action = state.receivedHead(head, candidate: candidate)
            if action == .none && state.requestHasBody && Self.expectsContinue(head) {
                if router.readsBody(of: head.uri) {
                    // RFC 9110 §10.1.1: the client waits for this before sending the body (curl: 1 s).
                    let interim = ByteBuffer(staticString: "HTTP/1.1 100 Continue\r\n\r\n")
                    timeouts?.queued(bytes: interim.readableBytes)
                    context.writeAndFlush(wrapOutboundOut(.byteBuffer(interim)), promise: nil)
                } else {
                    // Nothing here reads a body: the final answer now, without it; the client need not send it.
                    action = state.answerWithoutBody()
                }
            }
            timeouts?.requestHeadReceived(awaitingBody: action == .none)
            run(action, context: context, head: head)
        case .body(let buffer):
            run(state.receivedBody(buffer), context: context, head: nil)
        case .end:
            timeouts?.requestReceived()
            run(state.receivedEnd(), context: context, head: nil)
        }
    }

    /// `Expect: 100-continue` on an HTTP/1.1 request (an HTTP/1.0 one's must be ignored, RFC 9110 §10.1.1).
    private static func expectsContinue(_ head: HTTPRequestHead) -> Bool {
        guard head.version.minor >= 1 || head.version.major > 1, let expect = head.headers.first(name: "expect") else { return false }
        return expect.trimmingCharacters().lowercased() == "100-continue"
    }

    func read(context: ChannelHandlerContext) {
        if state.readRequested() { context.read() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        router.connectionEnded(largeSendHold)
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
        run(state.drain(), context: context, head: nil)
        guard state.awaitsFirstRequest else { return }
        // Not asked anything yet: its first request may be on its way. Closed if none has begun in a while.
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: drainFirstRequestWindow) {
            let (handler, context) = bound.value
            guard handler.state.awaitsFirstRequest, handler.context === context else { return }
            context.close(promise: nil)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // The decoder refused the bytes (malformed request, head over the size limit, unknown method): every request
        // decoded before them is answered first, in order, then the refusal (4xx/501), then the connection closes.
        // After that the decoder reports every later read as an error too (ignored here). Anything else ends the
        // connection.
        let refusal: ProxyError
        if error is RequestDecoder.UnknownMethod {
            refusal = .notImplemented("in the request line")
        } else if let parseError = error as? HTTPParserError {
            refusal =
                parseError == .headerOverflow
                ? .headersTooLarge("request head too large") : .badRequest("malformed HTTP request (\(parseError))")
        } else {
            if !(error is ByteToMessageDecoderError) { context.close(promise: nil) }
            return
        }
        if state.decoderRefused(refusal) { deliverQueued(context: context) }
    }

    private func run(_ action: ProxyConnectionStateMachine.Action, context: ChannelHandlerContext, head: HTTPRequestHead?) {
        switch action {
        case .none:
            break
        case .dispatch(let head, _, let body, let candidate):
            var request = ProxyRequest(
                head: head, remoteAddress: peer(of: context), localAddress: context.channel.localAddress, body: body)
            let webOrigins = self.webOrigins
            request.page = request.judgedPage(by: webOrigins)
            let responder = Responder(
                eventLoop: context.eventLoop, request: request, handler: self, webOrigins: webOrigins, observer: observer, shard: loopIndex)
            self.responder = responder
            router.route(request, responder: responder)
            // Answered with a replayed hit: the same head bytes are answered that way next time.
            if let candidate, let replays, let answer = responder.replayedAnswer, !state.requestHasBody {
                replays.remember(hash: candidate.hash, headBytes: candidate.head.count) {
                    ReplayedExchange(
                        head: candidate.head, hash: candidate.hash, request: request, route: responder.route,
                        routeObserver: responder.routeObserver, answer: answer, webOriginsVersion: lastWebOrigins?.version ?? 0)
                }
            }
        case .reject(let error):
            let received = state.takeRejectedHead()
            let cut = head ?? received
            let request = ProxyRequest(
                head: cut ?? HTTPRequestHead(version: .http1_1, method: .GET, uri: "/"), remoteAddress: context.channel.remoteAddress)
            let responder = Responder(
                eventLoop: context.eventLoop, request: request, handler: self, webOrigins: webOrigins, observer: observer, shard: loopIndex)
            self.responder = responder
            responder.send(error: error, extraHeaders: ["Connection": "close"])
        case .awaitNextRequest:
            timeouts?.responseCompleted()
            deliverQueued(context: context)
        case .close:
            context.close(promise: nil)
        }
    }

    // MARK: - Replayed exchanges

    /// The connection's peer, read from the channel once (NIO takes a lock for each read of it).
    private var peerAddress: SocketAddress?

    private func peer(of context: ChannelHandlerContext) -> SocketAddress? {
        if let peerAddress { return peerAddress }
        peerAddress = context.channel.remoteAddress
        return peerAddress
    }

    /// Answers the request whose whole head is `head` (at the start of the bytes read, at a message boundary) the way
    /// the same bytes were answered before, if the connection is idle and the answer still holds (``ReplayedExchanges``).
    /// False: the decoder decodes the bytes as usual.
    func replayExchange(head: ByteBufferView, hash: Int) -> Bool {
        guard let context, let replays, responder == nil, state.mayReplay, let exchange = replays.exchange(for: head, hash: hash) else {
            return false
        }
        let webOrigins = self.webOrigins
        guard exchange.webOriginsVersion == lastWebOrigins?.version else {
            // Judged by a policy a reload replaced since.
            replays.forget(exchange)
            return false
        }
        var request = exchange.request
        request.remoteAddress = peer(of: context)
        let responder = Responder(
            eventLoop: context.eventLoop, request: request, handler: self, webOrigins: webOrigins, observer: observer, shard: loopIndex)
        responder.route = exchange.route
        responder.routeObserver = exchange.routeObserver
        responder.isProxiedContent = true
        state.replayedRequestStarted()
        timeouts?.requestHeadReceived(awaitingBody: false)
        self.responder = responder
        if let how = router.replay(exchange, responder: responder) {
            replays.replayed &+= 1
            if how == .onEarlierCheck { replays.replayedOnCheck &+= 1 }
            return true
        }
        // The answer does not hold any more (another version, evicted, out of memory): decoded as usual.
        self.responder = nil
        state.replayedRequestAbandoned()
        replays.forget(exchange)
        return false
    }

    // MARK: - Writing (called by the Responder, on the event loop)

    private func encodeHead(
        status: HTTPResponseStatus, headers: HTTPHeaders, bodyLength: Int64?, headOnly: Bool, context: ChannelHandlerContext
    ) -> (ByteBuffer, BodyFraming) {
        var buffer = context.channel.allocator.buffer(capacity: 512)
        let framing = ResponseEncoding.writeHead(
            status: status, headers: headers, bodyLength: bodyLength, chunkedAllowed: state.chunkedAllowed, headOnly: headOnly,
            connection: state.connectionHeader, date: date?.line, into: &buffer)
        return (buffer, framing)
    }

    /// No `Connection` header goes with the response being written (see ``Responder/sendsPlainKeepAlive``).
    var sendsPlainKeepAlive: Bool { state.connectionHeader == nil }

    /// Whether no other connection shares this event loop (``LoopYield/isShared``; without a yield, as if alone).
    /// Off the loop it cannot be known: not alone.
    var aloneOnLoop: Bool {
        guard let yield else { return true }
        return yield.eventLoop.inEventLoop && !yield.isShared
    }

    func writeResponse(status: HTTPResponseStatus, headers: HTTPHeaders, body: ResponseBody, headOnly: Bool) {
        guard let context else {
            body.release()
            return
        }
        let (head, framing) = encodeHead(status: status, headers: headers, bodyLength: body.length, headOnly: headOnly, context: context)
        write(head: head, framing: framing, body: body, context: context)
    }

    /// Writes a 200 head rendered earlier (``HitReplay``: all but its `Date` line and blank line) and its body.
    func writePrepared(_ head: ByteBuffer, body: ResponseBody, headOnly: Bool) {
        guard let context else {
            body.release()
            return
        }
        let end = date?.lineAndEnd ?? ByteBuffer(staticString: "\r\n")
        // A small body (a playlist, a key) goes in one buffer with its head: one write through the pipeline
        // instead of three.
        if case .bytes(let bytes) = body, headOnly || bytes.readableBytes <= Self.coalescedBodyBytes {
            let bodyBytes = headOnly ? 0 : bytes.readableBytes
            var whole = context.channel.allocator.buffer(capacity: head.readableBytes + end.readableBytes + bodyBytes)
            whole.writeImmutableBuffer(head)
            whole.writeImmutableBuffer(end)
            if bodyBytes > 0 {
                whole.writeImmutableBuffer(bytes)
                bodyWriteObserver?(responder?.request.head.uri ?? "", true)
            }
            timeouts?.queued(bytes: whole.readableBytes)
            // With room in the channel (below its high-water mark) the answer is complete once handed over, without
            // a promise (its future, callback and generic metadata were ~4 % of a small hit: Benchmarks/nio-floor.sh):
            // a write that fails closes the channel, and then it did not succeed. Without room the promise is waited
            // for, so a client that does not read is not answered further: what it leaves unread stays bounded. (Bytes
            // the kernel has not taken yet are the send timeout's business, answer or not.)
            if context.channel.isWritable {
                context.writeAndFlush(wrapOutboundOut(.byteBuffer(whole)), promise: nil)
                responseWritten(success: context.channel.isActive, context: context)
                return
            }
            let done = context.eventLoop.makePromise(of: Void.self)
            completeResponse(when: done.futureResult, context: context)
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(whole)), promise: done)
            return
        }
        timeouts?.queued(bytes: head.readableBytes)
        write(head: head, then: end, framing: headOnly ? .none : .length, body: body, context: context)
    }

    /// Bodies up to this size are copied into their head's buffer by ``writePrepared(_:body:headOnly:)``.
    static let coalescedBodyBytes = 16 << 10

    /// Writes a response. A body longer than ``sliceBytes`` goes a slice of that size at a time, each after the event
    /// loop has looked at its other sockets again (``LoopYield``): a request arriving behind a large body on the same
    /// loop waits for one slice, not the whole body (nginx's `sendfile_max_chunk`, there 2 MiB).
    /// A body of ``directThreshold`` or more that is not sliced goes straight to the socket (``sendDirectly``).
    /// `rest`: the head's last bytes, when it comes in two buffers (a prepared head and its `Date` line).
    private func write(
        head: ByteBuffer, then rest: ByteBuffer? = nil, framing: BodyFraming, body: ResponseBody, context: ChannelHandlerContext
    ) {
        // What is handed to the channel, for the send timeout (measured against the channel's buffered bytes; what
        // ``sendDirectly`` sends itself is never buffered: it counts as sent at once); a sliced body counts each slice
        // as it is handed over.
        let sliced = framing != .none && sliceBytes > 0 && body.length > Int64(sliceBytes) && yield?.isShared == true
        timeouts?.queued(bytes: head.readableBytes + (rest?.readableBytes ?? 0) + (framing == .none || sliced ? 0 : Int(body.length)))
        if framing != .none, !sliced, body.length >= Self.directThreshold,
            sendDirectly(head: head, then: rest ?? ByteBuffer(), body: body, context: context)
        {
            return
        }
        let done = context.eventLoop.makePromise(of: Void.self)
        if let rest {
            context.write(wrapOutboundOut(.byteBuffer(head)), promise: nil)
            write(head: rest, framing: framing, body: body, sliced: sliced, done: done, context: context)
        } else {
            write(head: head, framing: framing, body: body, sliced: sliced, done: done, context: context)
        }
    }

    private func write(
        head: ByteBuffer, framing: BodyFraming, body: ResponseBody, sliced: Bool, done: EventLoopPromise<Void>,
        context: ChannelHandlerContext
    ) {
        switch body {
        case .empty:
            completeResponse(when: done.futureResult, context: context)
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(head)), promise: done)
        case .bytes(let buffer):
            completeResponse(when: done.futureResult, context: context)
            if framing == .none || buffer.readableBytes == 0 {
                context.writeAndFlush(wrapOutboundOut(.byteBuffer(head)), promise: done)
            } else if sliced {
                context.write(wrapOutboundOut(.byteBuffer(head)), promise: nil)
                writeSlice(of: .bytes(buffer), from: 0, length: Int64(buffer.readableBytes), done: done, context: context)
            } else {
                context.write(wrapOutboundOut(.byteBuffer(head)), promise: nil)
                bodyWriteObserver?(responder?.request.head.uri ?? "", true)
                context.writeAndFlush(wrapOutboundOut(.byteBuffer(buffer)), promise: done)
            }
        case .file(let handle, let offset, let length, _):
            if framing == .none || length == 0 {
                body.release()
                completeResponse(when: done.futureResult, context: context)
                context.writeAndFlush(wrapOutboundOut(.byteBuffer(head)), promise: done)
                return
            }
            // The file is closed and unpinned before the next pipelined request is looked at.
            completeResponse(when: done.futureResult, context: context, releasing: body)
            context.write(wrapOutboundOut(.byteBuffer(head)), promise: nil)
            // Corked, the head leaves in the same full-sized segments as the file's first bytes instead of a
            // small packet of its own (nginx's `tcp_nopush`); uncorking once sendfile has the data pushes the
            // tail out at once. About 10-15% more 2 MiB hits per second, but about 10% fewer 256 KiB ones, so
            // only large bodies are corked (docs/benchmarks.md).
            let cork = length >= Self.corkThreshold
            if cork { setCork(true, on: context.channel) }
            if sliced {
                writeSlice(of: .file(handle, offset: offset), from: 0, length: length, done: done, context: context)
            } else {
                let region = FileRegion(fileHandle: handle, readerIndex: Int(offset), endIndex: Int(offset + length))
                bodyWriteObserver?(responder?.request.head.uri ?? "", true)
                context.writeAndFlush(wrapOutboundOut(.fileRegion(region)), promise: done)
            }
            if cork { setCork(false, on: context.channel) }
        }
    }

    /// Bodies at least this long are sent with ``ConnectionSocket`` when they can be.
    static let directThreshold: Int64 = 64 << 10

    /// The connection's socket for ``sendDirectly`` (nil: not looked up yet; `.some(nil)`: it cannot be).
    private var directSocket: ConnectionSocket??

    /// Sends a response straight to the socket (``ConnectionSocket``), if NIO holds none of the connection's bytes:
    /// the head and a body from memory in one `sendmsg`; the head of a file body with `MSG_MORE` (it shares the first
    /// full segment with the file's bytes, as `TCP_CORK` did, without its two `setsockopt`) and the file with
    /// `sendfile`. False: nothing was sent, the caller writes it the usual way. What the kernel does not take at once
    /// goes to the channel behind what it took, and the response completes when the last byte is taken; taken at
    /// once, it completes here, without a promise (its future and callback were ~1 % of a 2 MiB file hit's CPU); a
    /// failed send completes it unsuccessfully and closes the connection.
    private func sendDirectly(head: ByteBuffer, then rest: ByteBuffer, body: ResponseBody, context: ChannelHandlerContext) -> Bool {
        var file: CInt?
        var bytes = ByteBuffer()
        switch body {
        case .empty: return false
        case .bytes(let buffer): bytes = buffer
        case .file(let handle, _, _, _):
            guard let descriptor = try? handle.withUnsafeFileDescriptor({ $0 }) else { return false }
            file = descriptor
        }
        if directSocket == nil { directSocket = .some(ConnectionSocket.of(context.channel)) }
        guard let socket = directSocket ?? nil else { return false }
        if socketOptions == nil { socketOptions = context.channel.syncOptions }
        guard let buffered = try? socketOptions?.getOption(.bufferedWritableBytes), buffered == 0 else { return false }
        let inMemory = Int64(head.readableBytes + rest.readableBytes + bytes.readableBytes)
        let total = inMemory + (file == nil ? 0 : body.length)
        let sentAtOnce = socket.send(head, rest, bytes, more: file != nil)
        // The socket is full: all of it the usual way.
        if sentAtOnce == .partly(0) { return false }
        bodyWriteObserver?(responder?.request.head.uri ?? "", true)
        let target = directSendObserver == nil ? "" : responder?.request.head.uri ?? ""
        var sent: Int64 = 0
        // A reset or a closed peer: the response did not complete (the connection closes; nothing to log).
        var failed = false
        switch sentAtOnce {
        case .all: sent = inMemory
        case .partly(let count): sent = count
        case .failed: failed = true
        }
        if let file, sent == inMemory, case .file(_, let offset, let length, _) = body {
            switch socket.sendFile(file, offset: offset, length: length) {
            case .all: sent += length
            case .partly(let count): sent += count
            case .failed: failed = true
            }
        }
        directSendObserver?(target, sent, total)
        // A file is closed and unpinned before the next pipelined request is looked at.
        if failed {
            body.release()
            responseWritten(success: false, context: context)
            context.close(promise: nil)
            return true
        }
        if sent == total {
            body.release()
            responseWritten(success: true, context: context)
            return true
        }
        let done = context.eventLoop.makePromise(of: Void.self)
        completeResponse(when: done.futureResult, context: context, releasing: body)
        // The rest once the socket is writable, in order, behind what was sent.
        var skip = sent
        var unsent: [ByteBuffer] = []
        for part in [head, rest, bytes] {
            if skip >= part.readableBytes {
                skip -= Int64(part.readableBytes)
            } else {
                unsent.append(part.getSlice(at: part.readerIndex + Int(skip), length: part.readableBytes - Int(skip))!)
                skip = 0
            }
        }
        if case .file(let handle, let offset, let length, _) = body {
            for part in unsent { context.write(wrapOutboundOut(.byteBuffer(part)), promise: nil) }
            let region = FileRegion(fileHandle: handle, readerIndex: Int(offset + max(0, sent - inMemory)), endIndex: Int(offset + length))
            context.writeAndFlush(wrapOutboundOut(.fileRegion(region)), promise: done)
        } else {
            for part in unsent.dropLast() { context.write(wrapOutboundOut(.byteBuffer(part)), promise: nil) }
            context.writeAndFlush(wrapOutboundOut(.byteBuffer(unsent.last!)), promise: done)
        }
        return true
    }

    /// Where the slices of a body come from.
    private enum SliceSource {
        case bytes(ByteBuffer)
        /// An open file and where the body starts in it.
        case file(NIOFileHandle, offset: Int64)
    }

    /// Writes the slice of `source` at `position` (of `length` bytes in all); once the kernel took it, the next one
    /// waits for the loop's next poll. The last slice completes `done`; a failed write fails it.
    private func writeSlice(
        of source: SliceSource, from position: Int64, length: Int64, done: EventLoopPromise<Void>, context: ChannelHandlerContext
    ) {
        guard self.context != nil else {
            done.fail(ChannelError.ioOnClosedChannel)
            return
        }
        // Alone on the loop now (the others closed): the rest at once.
        let end = yield?.isShared == true ? min(position + Int64(sliceBytes), length) : length
        let data: IOData
        switch source {
        case .bytes(let buffer):
            data = .byteBuffer(buffer.getSlice(at: buffer.readerIndex + Int(position), length: Int(end - position))!)
        case .file(let handle, let offset):
            data = .fileRegion(FileRegion(fileHandle: handle, readerIndex: Int(offset + position), endIndex: Int(offset + end)))
        }
        timeouts?.queued(bytes: Int(end - position))
        bodyWriteObserver?(responder?.request.head.uri ?? "", end == length)
        guard end < length, let yield else {
            context.writeAndFlush(wrapOutboundOut(data), promise: done)
            return
        }
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(data), promise: written)
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        written.futureResult.whenComplete { result in
            switch result {
            case .success:
                yield.afterNextPoll {
                    let (handler, context) = bound.value
                    handler.writeSlice(of: source, from: end, length: length, done: done, context: context)
                }
            case .failure(let error):
                done.fail(error)
            }
        }
    }

    /// Bodies at least this long are sent corked.
    static let corkThreshold: Int64 = 1 << 20

    #if os(Linux)
        private static let corkOption = ChannelOptions.Types.SocketOption(level: .tcp, name: .init(rawValue: CInt(TCP_CORK)))
    #endif

    /// Sets `TCP_CORK` (Linux only; a failure only costs the optimisation).
    private func setCork(_ on: Bool, on channel: any Channel) {
        #if os(Linux)
            // Asked of the channel once per connection: each `syncOptions` is a generic metadata lookup and a boxed
            // value, two per large body.
            if socketOptions == nil { socketOptions = channel.syncOptions }
            try? socketOptions?.setOption(Self.corkOption, value: on ? 1 : 0)
        #endif
    }

    func writeStreamHead(status: HTTPResponseStatus, headers: HTTPHeaders, headOnly: Bool) {
        guard let context else { return }
        state.streamStarting(hasBody: !headOnly && status.mayHaveResponseBody, hasLength: headers.contains(name: "content-length"))
        let (head, framing) = encodeHead(status: status, headers: headers, bodyLength: nil, headOnly: headOnly, context: context)
        state.streamStarted(framing: framing)
        timeouts?.queued(bytes: head.readableBytes)
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(head)), promise: nil)
    }

    func writeStreamBody(_ buffer: ByteBuffer, flush: Bool, eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        guard let context else { return eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
        if state.streamFraming == .none { return eventLoop.makeSucceededVoidFuture() }
        if state.streamFraming == .chunked {
            // An empty chunk would end the body.
            if buffer.readableBytes == 0 { return eventLoop.makeSucceededVoidFuture() }
            // Size line, the body as it is (no copy) and the CRLF after it; they leave in one writev, and the
            // last write's future completes after the other two.
            var header = context.channel.allocator.buffer(capacity: 12)
            ResponseEncoding.writeChunkHeader(count: buffer.readableBytes, into: &header)
            timeouts?.queued(bytes: header.readableBytes + buffer.readableBytes + 2)
            context.write(wrapOutboundOut(.byteBuffer(header)), promise: nil)
            context.write(wrapOutboundOut(.byteBuffer(buffer)), promise: nil)
            let trailer = ByteBuffer(staticString: ResponseEncoding.chunkTrailer)
            return flush
                ? context.writeAndFlush(wrapOutboundOut(.byteBuffer(trailer))) : context.write(wrapOutboundOut(.byteBuffer(trailer)))
        }
        timeouts?.queued(bytes: buffer.readableBytes)
        if flush { return context.writeAndFlush(wrapOutboundOut(.byteBuffer(buffer))) }
        return context.write(wrapOutboundOut(.byteBuffer(buffer)))
    }

    /// A streamed body chunk sent from a file with sendfile (a client behind a shared download's memory window);
    /// `handle` is closed once written.
    func writeStreamFile(_ handle: NIOFileHandle, offset: Int64, length: Int64, eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        guard let context, state.streamFraming != .none else {
            try? handle.close()
            return context == nil ? eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) : eventLoop.makeSucceededVoidFuture()
        }
        let region = FileRegion(fileHandle: handle, readerIndex: Int(offset), endIndex: Int(offset + length))
        let written: EventLoopFuture<Void>
        if state.streamFraming == .chunked {
            var header = context.channel.allocator.buffer(capacity: 12)
            ResponseEncoding.writeChunkHeader(count: Int(length), into: &header)
            timeouts?.queued(bytes: header.readableBytes + Int(length) + 2)
            context.write(wrapOutboundOut(.byteBuffer(header)), promise: nil)
            context.write(wrapOutboundOut(.fileRegion(region)), promise: nil)
            written = context.writeAndFlush(wrapOutboundOut(.byteBuffer(ByteBuffer(staticString: ResponseEncoding.chunkTrailer))))
        } else {
            timeouts?.queued(bytes: Int(length))
            written = context.writeAndFlush(wrapOutboundOut(.fileRegion(region)))
        }
        written.whenComplete { _ in try? handle.close() }
        return written
    }

    func writeStreamEnd() {
        guard let context else { return }
        let done = context.eventLoop.makePromise(of: Void.self)
        completeResponse(when: done.futureResult, context: context)
        var end = context.channel.allocator.buffer(capacity: 8)
        // An empty write keeps the promise in order behind the body's writes.
        if state.streamFraming == .chunked { end.writeStaticString(ResponseEncoding.lastChunk) }
        state.streamEnded()
        timeouts?.queued(bytes: end.readableBytes)
        context.writeAndFlush(wrapOutboundOut(.byteBuffer(end)), promise: done)
    }

    func abortConnection() {
        responder = nil
        state.channelClosed()
        context?.close(promise: nil)
    }

    /// When `written` completes: `body` is released (its file closed and unpinned), then the response counts as
    /// written.
    private func completeResponse(
        when written: EventLoopFuture<Void>, context: ChannelHandlerContext, releasing body: ResponseBody = .empty
    ) {
        let bound = NIOLoopBound((handler: self, context: context, body: body), eventLoop: context.eventLoop)
        written.whenComplete { result in
            let (handler, context, body) = bound.value
            body.release()
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
