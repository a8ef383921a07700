import NIOCore
import NIOHTTP1

/// The life of one client connection: requests arrive one at a time (pipelined ones wait in its queue until the
/// response before them ends), each is answered once, and the connection is kept or closed. It also owns what
/// follows from that: when the socket may be read, the refusal of bytes the decoder gave up on (answered after every
/// request decoded before them), draining at shutdown, and the framing of HTTP/1.0 and streamed responses.
/// Pure: ``ProxyHTTPHandler`` feeds it events and runs the actions it returns; tests drive it without a channel.
struct ProxyConnectionStateMachine {
    private enum State {
        /// Waiting for a request head.
        case idle
        /// Head received; its body (bounded; only route extensions such as the admin API read it) is being read.
        /// `candidate`: the head's bytes, when the decoder found them whole (a replayed answer may be remembered
        /// for them).
        case receivingRequest(HTTPRequestHead, body: ByteBuffer?, candidate: RequestDecoder.Candidate?)
        /// The request is being answered.
        case responding(keepAlive: Bool)
        /// The request was rejected before it was complete; ignore the rest and close when the answer is out.
        case rejecting
        case closed
    }

    enum Action: Equatable {
        case none
        /// Hand the complete request to the router: its head, its body if it had one, and the head's bytes when the
        /// decoder found them whole.
        case dispatch(HTTPRequestHead, keepAlive: Bool, body: ByteBuffer? = nil, candidate: RequestDecoder.Candidate? = nil)
        /// Answer with this error and close the connection afterwards.
        case reject(ProxyError)
        /// The response is out; keep the connection open for the next request.
        case awaitNextRequest
        /// The response is out (or cannot be completed); close the connection.
        case close
    }

    private var state: State = .idle
    /// Request heads received (handed on from the queue) so far: the decoder numbers the heads it found whole so.
    private(set) var headsReceived = 0
    /// Request parts that arrived while a response was being written (HTTP pipelining), answered in order. While any
    /// wait here the socket is not read (``readRequested()``), so the queue holds at most one read's worth.
    private var queued = CircularBuffer<HTTPServerRequestPart>(initialCapacity: 4)
    /// A read the channel asked for while parts were queued; issued once the queue is empty.
    private var readHeld = false
    /// What the decoder refused, answered once every request decoded before it has been.
    private var pendingRefusal: ProxyError?
    /// The server is shutting down: no keep-alive, close when idle.
    private(set) var draining = false
    /// Whether a request began on this connection (decoded or replayed).
    private var askedAnything = false
    /// The request being answered is HTTP/1.0 (no chunked bodies; keep-alive must be said explicitly).
    private(set) var requestIsHTTP10 = false
    /// The head of the request whose body is still being read: the request refused when the rest never comes (the
    /// body timeout closed the connection, the client went away), so its answer is logged with its own path.
    private var headInProgress: HTTPRequestHead?
    /// How the body of the streamed response being written is framed.
    private(set) var streamFraming = BodyFraming.none

    /// Why `head`'s `Host` is unacceptable (RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without
    /// one, and to any request with more than one or with an invalid value), or nil.
    static func hostProblem(_ head: HTTPRequestHead) -> String? {
        var count = 0
        var value: String?
        for (name, fieldValue) in head.headers where name.utf8.count == 4 && ResponseEncoding.equalsIgnoringCase(name, "host") {
            count += 1
            value = fieldValue
        }
        if count > 1 { return "more than one Host header" }
        guard let value else { return head.version.major == 1 && head.version.minor == 0 ? nil : "no Host header (required in HTTP/1.1)" }
        // uri-host [":" port]: unreserved, pct-encoded, sub-delims, and the brackets and colons of IP literals and ports.
        // One switch per byte (searching a string of the punctuation for each byte was 0.6 % of a playlist hit).
        let allowed = value.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"), UInt8(ascii: "!"),
                UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
                UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "["),
                UInt8(ascii: "]"):
                return true
            default: return false
            }
        }
        return allowed ? nil : "invalid Host header"
    }

    /// The request being received announced a body (`Transfer-Encoding`, or a `Content-Length` above 0).
    private(set) var requestHasBody = false
    let maxHeaderCount: Int
    let maxRequestBodyBytes: Int

    init(maxHeaderCount: Int = 100, maxRequestBodyBytes: Int = 64 << 10) {
        self.maxHeaderCount = maxHeaderCount
        self.maxRequestBodyBytes = maxRequestBodyBytes
    }

    var isIdle: Bool {
        if case .idle = state { return true }
        return false
    }

    var isResponding: Bool {
        switch state {
        case .responding, .rejecting: return true
        default: return false
        }
    }

    /// Request head number ``headsReceived`` + 1; `candidate`: its bytes, if the decoder found them whole.
    mutating func receivedHead(_ head: HTTPRequestHead, candidate: RequestDecoder.Candidate? = nil) -> Action {
        headsReceived &+= 1
        switch state {
        case .idle:
            if head.headers.count > maxHeaderCount {
                state = .rejecting
                return .reject(.headersTooLarge("more than \(maxHeaderCount) header fields"))
            }
            // A body on a GET or HEAD has no meaning here and is a classic smuggling vector:
            // refuse Transfer-Encoding outright and Content-Length together with it.
            if head.headers.contains(name: "transfer-encoding") && head.headers.contains(name: "content-length") {
                state = .rejecting
                return .reject(.badRequest("both Transfer-Encoding and Content-Length"))
            }
            if let refusal = Self.hostProblem(head) {
                state = .rejecting
                return .reject(.badRequest(refusal))
            }
            let lengths = head.headers["content-length"]
            if lengths.count > 1 && Set(lengths).count > 1 {
                state = .rejecting
                return .reject(.badRequest("conflicting Content-Length headers"))
            }
            let declared = lengths.first.flatMap { Int($0) }
            if let declared, declared > maxRequestBodyBytes {
                state = .rejecting
                return .reject(.payloadTooLarge("request body larger than \(maxRequestBodyBytes) bytes"))
            }
            requestHasBody = (declared ?? 0) > 0 || head.headers.contains(name: "transfer-encoding")
            askedAnything = true
            state = .receivingRequest(head, body: nil, candidate: candidate)
            headInProgress = head
            return .none
        case .rejecting, .closed:
            return .none
        case .receivingRequest, .responding:
            // The handler never delivers a second head early; if it did, the stream is broken.
            state = .rejecting
            return .reject(.badRequest("unexpected request head"))
        }
    }

    /// Whether a request may be answered now without being decoded (``ReplayedExchanges``): idle, nothing queued or
    /// refused, not draining.
    var mayReplay: Bool { isIdle && queued.isEmpty && pendingRefusal == nil && !draining }

    /// A replayed exchange is being answered, as a kept-alive HTTP/1.1 request without a body would be.
    mutating func replayedRequestStarted() {
        guard mayReplay else { return }
        askedAnything = true
        state = .responding(keepAlive: true)
        requestIsHTTP10 = false
        requestHasBody = false
        headInProgress = nil
    }

    /// The replayed exchange could not be answered after all (nothing was written): idle again.
    mutating func replayedRequestAbandoned() {
        if case .responding = state { state = .idle }
    }

    mutating func receivedBody(_ part: ByteBuffer) -> Action {
        guard case .receivingRequest(let head, var body, let candidate) = state else { return .none }
        if (body?.readableBytes ?? 0) + part.readableBytes > maxRequestBodyBytes {
            state = .rejecting
            return .reject(ProxyError.payloadTooLarge("request body larger than \(maxRequestBodyBytes) bytes"))
        }
        state = .idle  // the body buffer is not shared while it grows
        var part = part
        body.setOrWriteBuffer(&part)
        state = .receivingRequest(head, body: body, candidate: candidate)
        return .none
    }

    mutating func receivedEnd() -> Action {
        guard case .receivingRequest(let head, let body, let candidate) = state else { return .none }
        // What follows a CONNECT on the connection is not HTTP (the decoder stops there): close after the answer.
        let keepAlive = head.isKeepAlive && head.method != .CONNECT
        return dispatch(head, keepAlive: keepAlive, body: body, candidate: candidate)
    }

    private mutating func dispatch(
        _ head: HTTPRequestHead, keepAlive: Bool, body: ByteBuffer?, candidate: RequestDecoder.Candidate?
    ) -> Action {
        state = .responding(keepAlive: keepAlive && !draining)
        headInProgress = nil
        requestIsHTTP10 = head.version.major == 1 && head.version.minor == 0
        return .dispatch(head, keepAlive: keepAlive && !draining, body: body, candidate: candidate)
    }

    /// The head of the request being rejected, when it was received (its body was still being read); taken once.
    mutating func takeRejectedHead() -> HTTPRequestHead? {
        requestIsHTTP10 = false
        defer { headInProgress = nil }
        return headInProgress
    }

    /// The request whose head was received is answered now, without its body (it asked `Expect: 100-continue`
    /// and nothing will read the body): its body is never read, and the connection closes after the answer.
    mutating func answerWithoutBody() -> Action {
        guard case .receivingRequest(let head, _, let candidate) = state else { return .none }
        return dispatch(head, keepAlive: false, body: nil, candidate: candidate)
    }

    /// Whether the response being written should tell the client the connection stays open.
    var responseKeepsAlive: Bool {
        if case .responding(let keepAlive) = state { return keepAlive }
        return false
    }

    mutating func responseCompleted(success: Bool) -> Action {
        streamFraming = .none
        switch state {
        case .responding(let keepAlive) where keepAlive && success && !draining:
            state = .idle
            return .awaitNextRequest
        case .closed:
            return .none
        default:
            state = .closed
            return .close
        }
    }

    /// The request decoder gave up on the bytes it was given (malformed, or a head over the size limit).
    /// A request not yet answered gets `error` and the connection closes; a response already under way
    /// finishes and then the connection closes.
    mutating func parseFailed(_ error: ProxyError) -> Action {
        switch state {
        case .idle, .receivingRequest:
            state = .rejecting
            return .reject(error)
        case .responding:
            state = .responding(keepAlive: false)
            return .none
        case .rejecting, .closed:
            return .none
        }
    }

    /// The response being written cannot be followed by another on this connection (its body ends when the
    /// connection closes).
    mutating func closeAfterResponse() {
        if case .responding = state { state = .responding(keepAlive: false) }
    }

    mutating func channelClosed() {
        state = .closed
        queued.removeAll()
        pendingRefusal = nil
    }

    // MARK: - Pipelining and reads

    /// A request part from the decoder; it waits in the queue until ``nextPart()`` hands it on.
    mutating func enqueue(_ part: HTTPServerRequestPart) {
        guard !isClosed else { return }
        queued.append(part)
    }

    /// The next queued part to act on, or nil while a response is being written or nothing waits.
    mutating func nextPart() -> HTTPServerRequestPart? {
        guard !isResponding, !isClosed else { return nil }
        return queued.popFirst()
    }

    /// What to do once the queue was handed on as far as it goes.
    enum QueueOutcome: Equatable {
        case none
        /// Issue the read the channel asked for while parts were queued.
        case read
        /// Every request decoded before the refused bytes is answered: run this (the refusal).
        case refuse(Action)
    }

    mutating func queueSettled() -> QueueOutcome {
        guard queued.isEmpty, !isResponding, !isClosed else { return .none }
        if let refusal = pendingRefusal {
            // (A request cut short by the refused bytes, its head delivered and its end not, is the one refused.)
            pendingRefusal = nil
            return .refuse(parseFailed(refusal))
        }
        if readHeld {
            readHeld = false
            return .read
        }
        return .none
    }

    /// The channel asks for a read: true to read now, false when it waits until the queued parts are answered.
    mutating func readRequested() -> Bool {
        if queued.isEmpty { return true }
        readHeld = true
        return false
    }

    /// The decoder refused the bytes after the queued parts; true when this is the first refusal (the handler then
    /// hands the queue on, and the refusal follows it). Later ones are the same bytes reported again.
    mutating func decoderRefused(_ refusal: ProxyError) -> Bool {
        guard pendingRefusal == nil, !isClosed else { return false }
        pendingRefusal = refusal
        return true
    }

    /// The server is shutting down: `.close` when the connection is idle now, else it closes after the response
    /// under way (which says `Connection: close`). A connection not asked anything yet is not closed: its first
    /// request may be on its way (a client that connected in the instant the server began to drain); the handler
    /// gives it ``ProxyConfiguration/drainFirstRequestWindow`` (``awaitsFirstRequest``).
    mutating func drain() -> Action {
        draining = true
        if case .responding = state { state = .responding(keepAlive: false) }
        return isIdle && queued.isEmpty && askedAnything ? .close : .none
    }

    /// Draining, and nothing asked yet on this connection: its first request is waited for (then answered, and the
    /// connection closed), for a while.
    var awaitsFirstRequest: Bool { draining && !askedAnything && isIdle && queued.isEmpty && pendingRefusal == nil }

    private var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    // MARK: - Response framing

    /// The `Connection` header of the response being written: `close` when the connection ends after it,
    /// `keep-alive` for an HTTP/1.0 client that asked to keep it, none otherwise.
    var connectionHeader: String? {
        if !responseKeepsAlive { return "close" }
        return requestIsHTTP10 ? "keep-alive" : nil
    }

    /// Chunked bodies may be sent (not to an HTTP/1.0 client).
    var chunkedAllowed: Bool { !requestIsHTTP10 }

    /// A streamed response (length unknown up front) is about to be written. To an HTTP/1.0 client a body without
    /// `Content-Length` can only end with the connection: then it closes after this response.
    mutating func streamStarting(hasBody: Bool, hasLength: Bool) {
        if hasBody && !hasLength && requestIsHTTP10 { closeAfterResponse() }
    }

    /// The streamed response's head was written with `framing`.
    mutating func streamStarted(framing: BodyFraming) {
        streamFraming = framing
    }

    /// The streamed response's end was written.
    mutating func streamEnded() {
        streamFraming = .none
    }
}
