import HLSCacheCore
import NIOCore
import NIOHTTP1

/// One client reading a ``SharedFetch``: sends the response head when the origin's arrives, then the body in order
/// (or only a byte window, for a Range request), paced by its own connection: from the fetch's memory window when
/// it keeps up, from the growing cache file (sendfile) when it is behind. Confined to the client's event loop.
final class FetchSubscription: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let responder: Responder
    private let fetch: SharedFetch
    private let range: (first: Int64, last: Int64)?
    private let playlists: PlaylistService
    /// Whether this client may receive a 16-byte body (``KeySizedBody``).
    private let mayReceiveKeySized: Bool
    /// The first body byte this client wants.
    let startOffset: Int64
    /// The next body byte to send.
    private var position: Int64
    private var headSent = false
    private var writing = false
    private var done = false
    /// Called instead of answering with the error when the fetch fails before anything was sent.
    var fallback: ((any HTTPMappableError) -> Void)?

    /// The most sent from the cache file in one write, so the position (and the fetch's view of it) moves on.
    static let maxFileWrite: Int64 = 8 << 20

    init(responder: Responder, fetch: SharedFetch, range: (first: Int64, last: Int64)?, services: ProxyServices) {
        self.eventLoop = responder.eventLoop
        self.responder = responder
        self.fetch = fetch
        self.range = range
        self.startOffset = range?.first ?? 0
        self.position = startOffset
        self.playlists = services.playlists
        self.mayReceiveKeySized = KeySizedBody.mayReceive(responder.request, services: services)
        responder.whenCancelled { [weak self] in self?.stop() }
    }

    /// Leaves the fetch: the response is complete, or the client is gone.
    private func stop() {
        done = true
        fetch.unsubscribe(self)
    }

    /// Moves as far as the fetch allows. Called whenever the fetch has news, and after each write.
    func pump() {
        eventLoop.preconditionInEventLoop()
        guard !done, !writing else { return }
        let view = fetch.view(from: position)
        let state = view.state
        if let error = state.failure {
            if !headSent, let fallback {
                stop()
                fallback(error)
                return
            }
            if headSent { responder.abort() } else { responder.send(error: error) }
            stop()
            return
        }
        guard let head = state.head else { return }
        if head.isPlaylist {
            responder.route = .playlist
            guard let playlist = state.playlist else { return }
            playlists.respond(with: playlist, to: responder, cache: "MISS")
            stop()
            return
        }
        if !headSent, !mayReceiveKeySized {
            // Known to be key-sized: refused. Of unknown length: held back until more than 16 bytes or the end came.
            if head.contentLength == KeySizedBody.size || (head.contentLength == nil && state.ended && state.received == KeySizedBody.size) {
                responder.send(error: KeySizedBody.refusal)
                stop()
                return
            }
            if head.contentLength == nil && !state.ended && state.received <= KeySizedBody.size { return }
        }
        if !headSent {
            sendHead(head)
            headSent = true
            if responder.request.isHead {
                responder.end()
                stop()
                return
            }
        }
        let end = range.map { $0.last + 1 } ?? Int64.max
        var next = position
        var last: EventLoopFuture<Void>?
        if let fileEnd = state.fileEnd {
            // Behind the memory window: what it lacks is on disk.
            let upTo = min(fileEnd, end, position + Self.maxFileWrite)
            guard let file = view.file else {
                responder.abort()
                stop()
                return
            }
            last = responder.writeFile(file, offset: position, length: upTo - position)
            next = upTo
        } else {
            var slices: [ByteBuffer] = []
            for chunk in state.chunks where next < end {
                let length = min(Int64(chunk.readableBytes), end - next)
                slices.append(length == Int64(chunk.readableBytes) ? chunk : chunk.getSlice(at: chunk.readerIndex, length: Int(length))!)
                next += length
            }
            for (index, slice) in slices.enumerated() {
                last = responder.write(slice, flush: index == slices.count - 1)
            }
        }
        position = next
        if next >= end || (state.ended && next == state.received) {
            responder.end()
            stop()
            return
        }
        guard let last else { return }
        writing = true
        let consumed = next
        last.whenComplete { [self] result in
            writing = false
            switch result {
            case .success:
                fetch.progress(self, to: consumed)
                pump()
            case .failure:
                responder.abort()
                stop()
            }
        }
    }

    private func sendHead(_ head: SharedFetch.Head) {
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
