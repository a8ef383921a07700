import NIOCore
import NIOHTTP1

/// NIO's `HTTPRequestDecoder`, made to keep decoding after a request that asks for a protocol upgrade.
///
/// llhttp marks a request with an `Upgrade` field and the `upgrade` connection option (`curl --http2` on an
/// `http://` URL sends `Upgrade: h2c` with every request; browsers send `Upgrade: websocket`) as the last HTTP
/// bytes on the connection, and NIO's decoder then stops parsing for good (`stopParsing`), expecting an
/// `HTTPServerUpgradeHandler` to take the connection over: every later request on it stayed unread until a
/// timeout closed it. hlscache upgrades to nothing — RFC 9110 §7.8 lets a server ignore `Upgrade`, and answers
/// such requests as ordinary ones — so when such a request has ended and the decoder produced nothing after it,
/// the decoder is replaced by a fresh one that reads the bytes after it as the next request.
///
/// ``ProxyHTTPHandler`` shows it every part it hands on (``handedOn(_:)``), from which it knows when such a request
/// ended (``upgradeRequestEnded``) and when any other part arrived after it (the decoder did not stop after all).
/// Both run on the connection's event loop.
///
/// It also tells a request line with a method llhttp does not know (`FOO / HTTP/1.1`: llhttp knows a fixed list and
/// refuses any other as `invalidMethod`, as it does `GARBAGE`) from a malformed line, so that the first gets 501
/// (RFC 9110 §9.1) and the second 400. It can only tell when the failing request is the first thing in the bytes
/// being decoded; behind other requests in the same read it stays a 400.
final class RequestDecoder: ByteToMessageDecoder {
    typealias InboundOut = HTTPServerRequestPart

    private var decoder = HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)
    /// The `.end` of a request that stops NIO's decoder was just handed on, and nothing since.
    private(set) var upgradeRequestEnded = false
    /// Request parts handed on so far.
    private(set) var partsDecoded = 0
    /// Request heads handed on so far, and whether the last one's request has not ended yet.
    private(set) var headsDecoded = 0
    private(set) var messageOpen = false
    /// The last head handed on asked for a protocol upgrade.
    private var decodingUpgradeRequest = false

    /// Counts a part the decoder produced, as it is handed on (before any queueing), and learns when a request that
    /// asked for an upgrade has ended — the server ignores `Upgrade` (RFC 9110 §7.8), so the connection goes on in
    /// HTTP/1.1.
    func handedOn(_ part: HTTPServerRequestPart) {
        partsDecoded &+= 1
        switch part {
        case .head(let head):
            upgradeRequestEnded = false
            headsDecoded &+= 1
            messageOpen = true
            decodingUpgradeRequest = Self.isUpgradeRequest(head)
        case .body:
            upgradeRequestEnded = false
        case .end:
            upgradeRequestEnded = decodingUpgradeRequest
            messageOpen = false
            decodingUpgradeRequest = false
        }
    }
    /// The handler, asked to answer a head it has answered before without decoding it (``ReplayedExchanges``).
    /// Held strongly and let go by the handler when it leaves the pipeline (``ProxyHTTPHandler/handlerRemoved(context:)``):
    /// a weak reference gives the handler a side table, and every retain and release of it then takes the runtime's
    /// slow path (5 % of a playlist hit's CPU, docs/benchmarks.md, issue 39).
    var replayer: ProxyHTTPHandler?
    /// NIO's decoder holds nothing of an unfinished request: the next bytes start a request, and a head found whole
    /// at their start can be answered without it.
    private var atBoundary = true
    /// The bytes of a whole `GET` head found at a boundary and handed to NIO's decoder: the head it decodes next
    /// (number `headNumber`), which the handler may remember with its answer.
    struct Candidate: Equatable {
        let head: [UInt8]
        let hash: Int
        let headNumber: Int
    }
    private var candidate: Candidate?

    /// The head bytes of request head number `number`, if they were found whole at a boundary; taken once.
    func takeCandidate(headNumber number: Int) -> Candidate? {
        guard let found = candidate, found.headNumber == number else { return nil }
        candidate = nil
        return found
    }

    /// A well-formed request line with a method llhttp does not know.
    struct UnknownMethod: Error {}

    /// Whether llhttp takes `head` for a protocol upgrade (its `upgrade` flag, which stops NIO's decoder): an
    /// `Upgrade` field together with an `upgrade` option in `Connection` or `Proxy-Connection`. (`CONNECT` stops it
    /// too, but what follows a `CONNECT` is not HTTP: that connection is closed after its answer.)
    /// `HTTPConformanceTests` checks this against the decoder itself.
    static func isUpgradeRequest(_ head: HTTPRequestHead) -> Bool {
        guard head.headers.contains(name: "upgrade") else { return false }
        for name in ["connection", "proxy-connection"] {
            for value in head.headers[name]
            where value.split(separator: ",").contains(where: { $0.trimmingSpaces().lowercased() == "upgrade" }) {
                return true
            }
        }
        return false
    }

    func decoderAdded(context: ChannelHandlerContext) {
        decoder.decoderAdded(context: context)
    }

    func decoderRemoved(context: ChannelHandlerContext) {
        decoder.decoderRemoved(context: context)
    }

    /// A read that is exactly one whole head, looked up by ``replayWhole(_:)`` without an answer: its length and hash,
    /// for ``decode(context:buffer:)`` to take it as the candidate without looking it up again.
    private var missedWhole: (length: Int, hash: Int)?

    /// Answers `read` before NIO's `ByteToMessageHandler` sees it, when it is exactly one whole head at a boundary
    /// (nothing of an earlier request is held: the handler's buffer is empty) that the handler answers as before
    /// (``ProxyHTTPHandler/replayExchange(head:hash:)``). A player's request is such a read: a replayed hit then skips
    /// the handler's buffering and decode loop (~5 % of a replayed playlist hit, docs/benchmarks.md). True: answered,
    /// the bytes must not be passed on. Called by ``ConnectionTimeoutHandler``, in front, on the event loop.
    func replayWhole(_ read: ByteBuffer) -> Bool {
        guard atBoundary, let replayer else { return false }
        let bytes = read.readableBytesView
        guard let length = ReplayedExchanges.getHeadLength(bytes), length == bytes.count else { return false }
        let hash = ReplayedExchanges.hash(bytes)
        if replayer.replayExchange(head: bytes, hash: hash) { return true }
        missedWhole = (length, hash)
        return false
    }

    func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        if atBoundary, let replayer {
            let bytes = buffer.readableBytesView
            if let missed = missedWhole {
                // Looked up in front a moment ago, these same bytes: remembered as the candidate, not looked up again.
                missedWhole = nil
                if missed.length == bytes.count {
                    candidate = Candidate(head: Array(bytes), hash: missed.hash, headNumber: headsDecoded + 1)
                }
            } else if let length = ReplayedExchanges.getHeadLength(bytes) {
                let head = bytes[bytes.startIndex..<bytes.startIndex + length]
                let hash = ReplayedExchanges.hash(head)
                if replayer.replayExchange(head: head, hash: hash) {
                    buffer.moveReaderIndex(forwardBy: length)
                    return buffer.readableBytes > 0 ? .continue : .needMoreData
                }
                candidate = Candidate(head: Array(head), hash: hash, headNumber: headsDecoded + 1)
            }
        }
        atBoundary = false
        let partsBefore = partsDecoded
        let state: DecodingState
        do {
            state = try decoder.decode(context: context, buffer: &buffer)
        } catch HTTPParserError.invalidMethod where partsDecoded == partsBefore && Self.startsWithRequestLine(buffer.readableBytesView) {
            // Nothing decoded in this call: the bytes start with the request that failed.
            throw UnknownMethod()
        }
        guard upgradeRequestEnded else {
            // Every request fed so far has ended and no byte of another is held: the next bytes start a request.
            if !messageOpen && buffer.readableBytes == 0 { atBoundary = true }
            return state
        }
        // The decoder stopped after the request (anything it decoded since would have cleared the flag): the bytes
        // left are the next request, for a fresh decoder.
        upgradeRequestEnded = false
        decoder.decoderRemoved(context: context)
        decoder = HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)
        decoder.decoderAdded(context: context)
        atBoundary = true
        return buffer.readableBytes > 0 ? .continue : .needMoreData
    }

    func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }

    /// Whether `bytes` start (after the empty lines a parser skips) with `token SP target SP HTTP/1.d CRLF`.
    static func startsWithRequestLine(_ bytes: ByteBufferView) -> Bool {
        var index = bytes.startIndex
        while index < bytes.endIndex, bytes[index] == 13 || bytes[index] == 10 { index += 1 }
        let methodStart = index
        while index < bytes.endIndex, ProxyRouter.isTokenCharacter(bytes[index]) { index += 1 }
        guard index > methodStart, index < bytes.endIndex, bytes[index] == UInt8(ascii: " ") else { return false }
        index += 1
        let targetStart = index
        while index < bytes.endIndex, bytes[index] > 0x20, bytes[index] < 0x7F { index += 1 }
        guard index > targetStart, index < bytes.endIndex, bytes[index] == UInt8(ascii: " ") else { return false }
        index += 1
        let version = "HTTP/1.".utf8
        guard bytes.endIndex - index >= version.count + 3, bytes[index..<index + version.count].elementsEqual(version) else { return false }
        index += version.count
        return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) && bytes[index + 1] == 13 && bytes[index + 2] == 10
    }
}
