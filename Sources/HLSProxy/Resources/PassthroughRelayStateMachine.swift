import HLSCacheCore
import HLSOrigin
import NIOCore
import NIOHTTP1

/// The decisions of a `Range` miss relayed to its client (``PassthroughRelay``), without a channel: the origin's head
/// is classified (``OriginHeadClassifier/range(_:url:)``) — a playlist goes to the whole-playlist path, media is
/// relayed as it comes, an answer that might be a playlist is held until its first bytes tell (``PlaylistSniffer``) —
/// then turned into the client's head, or an error; the body follows, and the end of the origin's answer ends or
/// aborts the client's. Each event returns the effects to run, in order.
struct PassthroughRelayStateMachine {
    enum State {
        case awaitingHead
        /// A head that may belong to a playlist its type does not announce, and the first bytes so far.
        case sniffing(OriginResponseHead, PlaylistSniffer)
        /// The client's head is sent; the origin's body is relayed.
        case relaying
        /// The client was answered otherwise (the playlist handed over, an error, a key-sized answer refused): the
        /// rest of the origin's answer is not wanted.
        case answered
        case finished
    }

    enum Effect: Equatable {
        /// The answer is a playlist: the whole-playlist path answers the client instead.
        case handOverPlaylist
        /// The client's head.
        case sendHead(HTTPResponseStatus, HTTPHeaders)
        /// Bytes of the body, in order.
        case write(ByteBuffer)
        /// The client's answer is complete.
        case end
        /// The origin answered with an error status: counted as the origin's failure, and answered.
        case answerOriginError(ProxyError)
        /// A key-sized answer this client may not have (``KeySizedBody``).
        case refuse(ProxyError)
        /// The origin's answer failed before the client's head was sent: counted, and answered with the error.
        case fail(OriginError)
        /// The origin's answer failed after the head: counted, and the client's connection aborted.
        case abort(OriginError)
        /// Stop reading the origin's answer.
        case stopReading
    }

    private(set) var state = State.awaitingHead
    private let url: OriginURL
    /// Whether this client may receive a 16- or 32-byte body (``KeySizedBody``).
    private let mayReceiveKeySized: Bool

    init(url: OriginURL, mayReceiveKeySized: Bool) {
        self.url = url
        self.mayReceiveKeySized = mayReceiveKeySized
    }

    mutating func receivedHead(_ head: OriginResponseHead) -> [Effect] {
        guard case .awaitingHead = state else { return [] }
        switch OriginHeadClassifier.range(head, url: url) {
        case .playlist:
            state = .answered
            return [.handOverPlaylist]
        case .sniff:
            state = .sniffing(head, PlaylistSniffer())
            return []
        case .media:
            return respond(to: head)
        }
    }

    mutating func receivedBody(_ buffer: ByteBuffer) -> [Effect] {
        switch state {
        case .sniffing(let head, var sniffer):
            guard let isPlaylist = sniffer.feed(buffer) else {
                state = .sniffing(head, sniffer)
                return []
            }
            let effects = release(head, sniffer: &sniffer, isPlaylist: isPlaylist)
            return isRelaying ? effects : effects + [.stopReading]
        case .relaying:
            return [.write(buffer)]
        case .awaitingHead, .answered, .finished:
            return [.stopReading]
        }
    }

    mutating func finished(_ result: Result<Void, OriginError>) -> [Effect] {
        var effects: [Effect] = []
        if case .sniffing(let head, var sniffer) = state, case .success = result {
            // The body ended before its first bytes could tell (a short or empty body).
            effects = release(head, sniffer: &sniffer, isPlaylist: sniffer.decisionAtEnd)
        }
        switch (state, result) {
        case (.relaying, .success):
            effects.append(.end)
        case (.relaying, .failure(let error)):
            effects.append(.abort(error))
        case (.awaitingHead, .failure(let error)), (.sniffing, .failure(let error)):
            effects.append(.fail(error))
        case (.awaitingHead, .success), (.sniffing, .success), (.answered, _), (.finished, _):
            break
        }
        state = .finished
        return effects
    }

    private var isRelaying: Bool {
        if case .relaying = state { return true }
        return false
    }

    /// The sniffer decided: the playlist is handed over, or the held head goes out with the bytes held meanwhile.
    private mutating func release(_ head: OriginResponseHead, sniffer: inout PlaylistSniffer, isPlaylist: Bool) -> [Effect] {
        if isPlaylist {
            state = .answered
            return [.handOverPlaylist]
        }
        let effects = respond(to: head)
        guard isRelaying else { return effects }
        return effects + sniffer.take().map(Effect.write)
    }

    /// The client's head for a media answer, or the error it gets instead.
    private mutating func respond(to head: OriginResponseHead) -> [Effect] {
        if let error = OriginHeadClassifier.rangeFailure(head, url: url) {
            state = .answered
            return [.answerOriginError(error)]
        }
        // A part of a 16-byte resource is a part of a key, as far as anyone can tell (KeySizedBody).
        if !mayReceiveKeySized, KeySizedBody.isKeySized(status: head.status, headers: head.headers) {
            state = .answered
            return [.refuse(KeySizedBody.refusal)]
        }
        var headers = HTTPHeaders()
        headers.add(
            name: "Content-Type",
            value: OriginHeadClassifier.mediaType(origin: head.headers.first(name: "Content-Type"), pathExtension: url.pathExtension))
        for name in ["Content-Length", "Content-Range", "Last-Modified", "ETag", "Accept-Ranges"] {
            if let value = head.headers.first(name: name) { headers.add(name: name, value: value) }
        }
        if !headers.contains(name: "Content-Length") { headers.add(name: "Transfer-Encoding", value: "chunked") }
        headers.add(name: "X-Cache", value: "MISS")
        state = .relaying
        return [.sendHead(HTTPResponseStatus(statusCode: head.status), headers)]
    }
}
