import HLSCacheCore
import NIOCore
import NIOHTTP1

/// The body of a complete response.
enum ResponseBody {
    case empty
    case bytes(ByteBuffer)
    /// `length` bytes of an open file starting at `offset`, sent with sendfile; `release` runs when the write
    /// is done (closing the handle and unpinning the cache object is the caller's business).
    case file(NIOFileHandle, offset: Int64, length: Int64, release: @Sendable () -> Void)

    /// The length of a complete body.
    var length: Int64 {
        switch self {
        case .empty: return 0
        case .bytes(let buffer): return Int64(buffer.readableBytes)
        case .file(_, _, let length, _): return length
        }
    }

    /// Closes a file body's handle and runs its `release` (a body that will not be sent, or was).
    func release() {
        guard case .file(let handle, _, _, let onRelease) = self else { return }
        try? handle.close()
        onRelease()
    }
}

/// The one way the resource layer answers a request. Bound to the connection's event loop: every method must
/// be called there. A responder answers exactly once; after the connection went away its methods do nothing.
///
/// Why `@unchecked` is safe: ``ProxyHTTPHandler`` makes it on its loop; whatever finishes elsewhere (thread-pool
/// reads, fetches, the admin API's tasks) hops back with `eventLoop.execute` or a future on `eventLoop` before
/// calling it, and each method that touches its state asserts so in debug builds (`assertInEventLoop`, which the
/// whole test suite runs under). It is not loop-bound storage because a hit touches it a dozen times.
final class Responder: @unchecked Sendable {
    let eventLoop: any EventLoop
    let request: ProxyRequest
    /// Strong, not weak (a weak reference would give the handler a side table: see ``RequestDecoder/replayer``): the
    /// handler lets go of its responder when the response is complete and, when the connection closes or the handler
    /// leaves the pipeline, tells it (``connectionClosed()``, ``detach()``), which lets go of the handler.
    private var handler: ProxyHTTPHandler?
    private var answered = false
    private var streaming = false
    /// Called (on the event loop) if the connection closes before the response is complete.
    private var onCancel: (() -> Void)?
    /// Who may read the answer from a web page (CORS).
    let webOrigins: WebOriginPolicy
    /// What the exchange was, for metrics and the access log; the router and the services refine them.
    var route = RequestRoute.other
    var cacheResult = CacheResult.none
    private var status = 0
    private var bodyBytes: Int64 = 0
    /// When the request started, for the access log's duration (read only when there is one: a clock reading per
    /// request otherwise for nothing).
    private let startedAt: NIODeadline
    private var recorded = false
    private let observer: ExchangeObserver?
    /// The index of the connection's event loop, where its counts go (``ShardedCounts``).
    private let shard: Int
    /// Told about the response head of a proxied resource (the admin layer records playback and hit ratio).
    var routeObserver: (any ProxyRouteExtension)?
    /// A proxied origin resource: sent sandboxed (an HTML page an origin serves must not run as this server's own
    /// origin, where it could call the admin API and `/keys/` as a same-origin page).
    var isProxiedContent = false
    /// Asked for by `/rewind/{scheme}/…`: a live media playlist is answered extended backwards (``RewrittenPlaylist/rewound``).
    var wantsRewind = false
    /// Set when the answer was a replayed hit (from the memory tier or its file): the same request bytes may be
    /// answered so again without being decoded (``ReplayedExchanges``).
    var replayedAnswer: ReplayedAnswer?
    /// Whether the memory tier counted this request already (a hit may look at the tier twice: a replay, then the
    /// ordinary path; each request counts once in what decides what enters).
    var memoryTierCounted = false

    init(
        eventLoop: any EventLoop, request: ProxyRequest, handler: ProxyHTTPHandler, webOrigins: WebOriginPolicy,
        observer: ExchangeObserver? = nil, shard: Int = 0
    ) {
        self.shard = shard
        self.startedAt = observer?.logsAccess == true ? .now() : .uptimeNanoseconds(0)
        self.eventLoop = eventLoop
        self.request = request
        self.handler = handler
        self.webOrigins = webOrigins
        self.observer = observer
    }

    func whenCancelled(_ callback: @escaping () -> Void) {
        eventLoop.preconditionInEventLoop()
        onCancel = callback
    }

    /// Sends a complete response. For HEAD requests the body is dropped (its length stays in the headers).
    func send(status: HTTPResponseStatus, headers: HTTPHeaders, body: ResponseBody) {
        eventLoop.preconditionInEventLoop()
        guard !answered, let handler else {
            body.release()
            return
        }
        answered = true
        self.status = Int(status.code)
        if !request.isHead { bodyBytes = body.length }
        var headers = headers
        decorate(&headers)
        routeObserver?.didRespond(to: request, status: status, headers: headers, shard: shard)
        handler.writeResponse(status: status, headers: headers, body: body, headOnly: request.isHead)
    }

    /// Sends a 200 whose head was rendered earlier for the same object (``HitReplay``): `head` is the exact bytes,
    /// `headers` what they say (for the route observer). Only when ``sendsPlainKeepAlive``.
    func sendPrepared(_ head: ByteBuffer, headers: HTTPHeaders, body: ResponseBody) {
        eventLoop.preconditionInEventLoop()
        guard !answered, let handler else {
            body.release()
            return
        }
        answered = true
        status = 200
        if !request.isHead { bodyBytes = body.length }
        routeObserver?.didRespond(to: request, status: .ok, headers: headers, shard: shard)
        handler.writePrepared(head, body: body, headOnly: request.isHead)
    }

    /// Whether the connection this responder answers on holds a large body (its handler's; nil once it is gone): what
    /// the memory tier counts large bodies in flight by.
    var largeSendHold: LargeSendHold? { handler?.largeSendHold }

    /// Whether no other connection shares this connection's event loop (its handler's; true once it is gone): where a
    /// cold large copy may still go from memory (``MemoryTier/bodyToSend(of:on:alone:headOnly:counted:)``).
    var aloneOnLoop: Bool { handler?.aloneOnLoop ?? true }

    /// Whether a response on this connection goes out without a `Connection` header (HTTP/1.1, kept alive, not
    /// draining): the case a replayed head was rendered for.
    var sendsPlainKeepAlive: Bool { handler?.sendsPlainKeepAlive ?? false }

    /// `headers` as ``send(status:headers:body:)`` sends them (CORS added).
    func decorated(_ headers: HTTPHeaders) -> HTTPHeaders {
        var headers = headers
        decorate(&headers)
        return headers
    }

    /// Sends an error as JSON with its status.
    func send(error: some HTTPMappableError) {
        send(error: error, extraHeaders: [:])
    }

    func send(error: some HTTPMappableError, extraHeaders: HTTPHeaders) {
        var buffer = ByteBuffer()
        buffer.writeString(ErrorBody.json(code: error.code, message: error.message))
        var headers = extraHeaders
        headers.replaceOrAdd(name: "Content-Type", value: "application/json")
        headers.replaceOrAdd(name: "Content-Length", value: String(buffer.readableBytes))
        headers.replaceOrAdd(name: "Cache-Control", value: "no-store")
        // An origin that asked to be left alone (429/503 with Retry-After) asks the player too.
        if let seconds = error.retryAfterSeconds, !headers.contains(name: "Retry-After") {
            headers.add(name: "Retry-After", value: String(seconds))
        }
        send(status: HTTPResponseStatus(statusCode: error.httpStatus), headers: headers, body: .bytes(buffer))
    }

    /// Starts a streamed response; follow with `write` calls and one `end` (or `abort`).
    func beginStream(status: HTTPResponseStatus, headers: HTTPHeaders) {
        eventLoop.preconditionInEventLoop()
        guard !answered, let handler else { return }
        answered = true
        streaming = true
        self.status = Int(status.code)
        var headers = headers
        decorate(&headers)
        routeObserver?.didRespond(to: request, status: status, headers: headers, shard: shard)
        handler.writeStreamHead(status: status, headers: headers, headOnly: request.isHead)
    }

    /// Writes a body chunk; the future completes when it was handed to the kernel, which is the pace to keep.
    func write(_ buffer: ByteBuffer, flush: Bool = true) -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        guard streaming, let handler else { return eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
        if request.isHead { return eventLoop.makeSucceededVoidFuture() }
        bodyBytes += Int64(buffer.readableBytes)
        return handler.writeStreamBody(buffer, flush: flush, eventLoop: eventLoop)
    }

    /// Writes `length` bytes of `file` from `offset` as a body chunk, with sendfile; the future completes when they
    /// were handed to the kernel.
    func writeFile(_ file: GrowingFile, offset: Int64, length: Int64) -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        guard streaming, let handler else { return eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
        if request.isHead || length == 0 { return eventLoop.makeSucceededVoidFuture() }
        guard let handle = file.handle() else { return eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel) }
        bodyBytes += length
        return handler.writeStreamFile(handle, offset: offset, length: length, eventLoop: eventLoop)
    }

    func end() {
        eventLoop.preconditionInEventLoop()
        guard streaming, let handler else { return }
        streaming = false
        handler.writeStreamEnd()
    }

    /// Ends the exchange by closing the connection: the client must see that the body is incomplete.
    func abort() {
        eventLoop.preconditionInEventLoop()
        streaming = false
        answered = true
        completed(success: false)
        handler?.abortConnection()
    }

    /// The handler reports that the response was written out (or failed to be): counted and logged once.
    func completed(success: Bool) {
        guard !recorded else { return }
        recorded = true
        observer?.exchangeCompleted(
            request: request, route: route, status: answered ? status : 499, cache: cacheResult, bytes: bodyBytes, startedAt: startedAt,
            complete: success, shard: shard)
    }

    /// The handler left the pipeline (an upgrade took the connection over): nothing more is written through it.
    func detach() {
        eventLoop.preconditionInEventLoop()
        handler = nil
        streaming = false
    }

    /// The handler reports that the connection is gone.
    func connectionClosed() {
        eventLoop.preconditionInEventLoop()
        completed(success: false)
        handler = nil
        streaming = false
        let callback = onCancel
        onCancel = nil
        callback?()
    }

    /// CORS for the pages `http.allowedWebOrigins` allows (docs/http.md): their `Origin` echoed, with `Vary: Origin`
    /// so that a browser's cache never hands one page's answer to another; `*` for every request when the setting
    /// says `*`; nothing for other pages, which then cannot read the answer.
    private func decorate(_ headers: inout HTTPHeaders) {
        if webOrigins.allowsAnyPage {
            headers.replaceOrAdd(name: "Access-Control-Allow-Origin", value: "*")
            headers.replaceOrAdd(name: "Access-Control-Expose-Headers", value: Self.exposedHeaders)
        } else {
            if case .allowed(let origin?) = request.page {
                headers.replaceOrAdd(name: "Access-Control-Allow-Origin", value: origin)
                headers.replaceOrAdd(name: "Access-Control-Expose-Headers", value: Self.exposedHeaders)
            }
            headers.add(name: "Vary", value: "Origin")
        }
        if isProxiedContent {
            headers.replaceOrAdd(name: "Content-Security-Policy", value: "sandbox")
            headers.replaceOrAdd(name: "X-Content-Type-Options", value: "nosniff")
        }
    }

    /// Whether the CORS headers name this request's page (its `Origin` echoed): such a head is not one to replay for
    /// other requests.
    var echoesOrigin: Bool {
        guard !webOrigins.allowsAnyPage, case .allowed(let origin) = request.page else { return false }
        return origin != nil
    }

    static let exposedHeaders = "Content-Length, Content-Range, Accept-Ranges, ETag, X-Cache"
}
