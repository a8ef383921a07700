import HLSCacheCore
import NIOCore
import NIOHTTP1

/// One client reading a ``SharedFetch``: sends the response head when the origin's arrives, then the body in order
/// (or only a byte window, for a Range request), paced by its own connection: from the fetch's memory window when
/// it keeps up, from the growing cache file (sendfile) when it is behind. The decisions are
/// ``FetchSubscriptionStateMachine``'s; this class runs them. Confined to the client's event loop.
///
/// Why `@unchecked` is safe: the shared fetch, which reports from any thread, only ever wakes a subscription with
/// `subscriber.eventLoop.execute { subscriber.pump() }`; every other entry is a callback of its own connection's
/// writes, on that loop (`pump` checks it, `preconditionInEventLoop`).
final class FetchSubscription: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let responder: Responder
    private let fetch: SharedFetch
    private let range: (first: Int64, last: Int64)?
    private let playlists: PlaylistService
    private var state: FetchSubscriptionStateMachine
    /// Called instead of answering with the error when the fetch fails before anything was sent.
    private let fallback: ((any HTTPMappableError) -> Void)?

    /// The first body byte this client wants.
    var startOffset: Int64 { state.startOffset }

    /// Whether the client asked for the whole body (no Range): it may join a never-ending stream live.
    var wantsWholeBody: Bool { range == nil }

    /// The download took the client on at `offset` (a never-ending stream joined live), before any pump.
    func joined(at offset: Int64) {
        state.joined(at: offset)
    }

    init(
        responder: Responder, fetch: SharedFetch, range: (first: Int64, last: Int64)?, services: ProxyServices,
        fallback: ((any HTTPMappableError) -> Void)? = nil
    ) {
        self.eventLoop = responder.eventLoop
        self.responder = responder
        self.fetch = fetch
        self.range = range
        self.playlists = services.playlists
        self.fallback = fallback
        self.state = FetchSubscriptionStateMachine(
            range: range, headOnly: responder.request.isHead,
            mayReceiveKeySized: KeySizedBody.mayReceive(responder.request, services: services),
            hasFallback: fallback != nil)
        responder.whenCancelled { [weak self] in
            guard let self else { return }
            self.state.cancelled()
            self.fetch.unsubscribe(self)
        }
    }

    /// Moves as far as the fetch allows. Called whenever the fetch has news, and after each write.
    func pump() {
        eventLoop.preconditionInEventLoop()
        guard !state.isDone else { return }
        let view = fetch.view(from: state.position)
        switch state.pump(view.state) {
        case .wait:
            return
        case .markPlaylist:
            responder.route = .playlist
        case .respondPlaylist(let playlist):
            responder.route = .playlist
            playlists.respond(with: playlist, to: responder, cache: "MISS")
            fetch.unsubscribe(self)
        case .fallback(let error):
            fetch.unsubscribe(self)
            fallback?(error)
        case .sendError(let error):
            responder.send(error: error)
            fetch.unsubscribe(self)
        case .abort:
            responder.abort()
            fetch.unsubscribe(self)
        case .refuseKeySized:
            responder.send(error: KeySizedBody.refusal)
            fetch.unsubscribe(self)
        case .send(let head, let body, let end):
            if let head { sendHead(head) }
            var written: EventLoopFuture<Void>?
            switch body {
            case .none:
                break
            case .chunks(let chunks):
                for (index, chunk) in chunks.enumerated() { written = responder.write(chunk, flush: index == chunks.count - 1) }
            case .file(let offset, let length):
                if let file = view.file {
                    written = file.send(offset: offset, length: length, to: responder)
                } else {
                    // Cannot happen: bytes behind the window are on disk. Cut the client off rather than send a hole.
                    written = eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
                }
            }
            if end {
                responder.end()
                fetch.unsubscribe(self)
                return
            }
            written?.whenComplete { [self] result in
                // The client went away meanwhile: already left.
                guard !state.isDone else { return }
                let success: Bool
                if case .success = result { success = true } else { success = false }
                guard let position = state.writeCompleted(success: success) else {
                    responder.abort()
                    fetch.unsubscribe(self)
                    return
                }
                fetch.progress(self, to: position)
                pump()
            }
        }
    }

    private func sendHead(_ head: FetchHead) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: head.contentType)
        headers.add(name: "X-Cache", value: "MISS")
        headers.add(name: "Accept-Ranges", value: "bytes")
        if let lastModified = head.lastModified { headers.add(name: "Last-Modified", value: lastModified) }
        // The origin's strong tag, which the object will be stored and served with (none when it had none).
        if let etag = head.etag { headers.add(name: "ETag", value: etag) }
        var status = HTTPResponseStatus.ok
        if let range, let total = head.contentLength {
            status = .partialContent
            headers.add(name: "Content-Range", value: "bytes \(range.first)-\(range.last)/\(total)")
            headers.add(name: "Content-Length", value: String(range.last - range.first + 1))
        } else if let length = head.contentLength {
            headers.add(name: "Content-Length", value: String(length))
        } else if responder.request.head.version.major == 1 && responder.request.head.version.minor >= 1 {
            headers.add(name: "Transfer-Encoding", value: "chunked")
        } else {
            headers.add(name: "Connection", value: "close")
        }
        responder.beginStream(status: status, headers: headers)
    }
}
