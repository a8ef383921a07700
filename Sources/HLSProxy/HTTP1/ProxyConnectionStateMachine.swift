import NIOHTTP1

/// The life of one client connection: requests arrive one at a time (``ProxyHTTPHandler`` queues pipelined
/// requests until the response before them ends), each is answered once, and the connection is kept or closed.
/// Pure: the handler feeds it events and runs the actions it returns; tests drive it without a channel.
struct ProxyConnectionStateMachine {
    private enum State {
        /// Waiting for a request head.
        case idle
        /// Head received; its body (bounded; only route extensions such as the admin API read it) is being read.
        case receivingRequest(HTTPRequestHead, bodyBytes: Int)
        /// The request is being answered.
        case responding(keepAlive: Bool)
        /// The request was rejected before it was complete; ignore the rest and close when the answer is out.
        case rejecting
        case closed
    }

    enum Action: Equatable {
        case none
        /// Hand the complete request to the router.
        case dispatch(HTTPRequestHead, keepAlive: Bool)
        /// Answer with this error and close the connection afterwards.
        case reject(ProxyError)
        /// The response is out; keep the connection open for the next request.
        case awaitNextRequest
        /// The response is out (or cannot be completed); close the connection.
        case close
    }

    private var state: State = .idle
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
        let allowed = value.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
            default: return "-._~%!$&'()*+,;=:[]".utf8.contains(byte)
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

    mutating func receivedHead(_ head: HTTPRequestHead) -> Action {
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
            state = .receivingRequest(head, bodyBytes: 0)
            return .none
        case .rejecting, .closed:
            return .none
        case .receivingRequest, .responding:
            // The handler never delivers a second head early; if it did, the stream is broken.
            state = .rejecting
            return .reject(.badRequest("unexpected request head"))
        }
    }

    mutating func receivedBody(count: Int) -> Action {
        guard case .receivingRequest(let head, let bytes) = state else { return .none }
        if bytes + count > maxRequestBodyBytes {
            state = .rejecting
            return .reject(ProxyError.payloadTooLarge("request body larger than \(maxRequestBodyBytes) bytes"))
        }
        state = .receivingRequest(head, bodyBytes: bytes + count)
        return .none
    }

    mutating func receivedEnd() -> Action {
        guard case .receivingRequest(let head, _) = state else { return .none }
        // What follows a CONNECT on the connection is not HTTP (the decoder stops there): close after the answer.
        let keepAlive = head.isKeepAlive && head.method != .CONNECT
        state = .responding(keepAlive: keepAlive)
        return .dispatch(head, keepAlive: keepAlive)
    }

    /// The request whose head was received is answered now, without its body (it asked `Expect: 100-continue`
    /// and nothing will read the body): its body is never read, and the connection closes after the answer.
    mutating func answerWithoutBody() -> Action {
        guard case .receivingRequest(let head, _) = state else { return .none }
        state = .responding(keepAlive: false)
        return .dispatch(head, keepAlive: false)
    }

    /// Whether the response being written should tell the client the connection stays open.
    var responseKeepsAlive: Bool {
        if case .responding(let keepAlive) = state { return keepAlive }
        return false
    }

    mutating func responseCompleted(success: Bool) -> Action {
        switch state {
        case .responding(let keepAlive) where keepAlive && success:
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
    }
}
