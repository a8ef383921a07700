import HLSCacheCore
import NIOCore
import NIOHTTP1

/// One client reading a ``SharedFetch``: sends the response head when the origin's arrives, then every chunk
/// in order (or only a byte window, for a Range request), paced by its own connection. Confined to the
/// client's event loop.
final class FetchSubscription: @unchecked Sendable {
    let eventLoop: any EventLoop
    private let responder: Responder
    private let fetch: SharedFetch
    private let range: (first: Int64, last: Int64)?
    private let playlists: PlaylistService
    /// Whether this client may receive a 16-byte body (``KeySizedBody``).
    private let mayReceiveKeySized: Bool
    private var nextChunk = 0
    private var headSent = false
    private var writing = false
    private var done = false
    /// Called instead of answering with the error when the fetch fails before anything was sent.
    var fallback: ((any HTTPMappableError) -> Void)?

    init(responder: Responder, fetch: SharedFetch, range: (first: Int64, last: Int64)?, services: ProxyServices) {
        self.eventLoop = responder.eventLoop
        self.responder = responder
        self.fetch = fetch
        self.range = range
        self.playlists = services.playlists
        self.mayReceiveKeySized = KeySizedBody.mayReceive(responder.request, services: services)
        responder.whenCancelled { [weak self] in self?.cancel() }
    }

    private func cancel() {
        done = true
        fetch.unsubscribe(self)
    }

    private func finish() {
        done = true
        fetch.unsubscribe(self)
    }

    /// Moves as far as the fetch allows. Called whenever the fetch has news, and after each write.
    func pump() {
        eventLoop.preconditionInEventLoop()
        guard !done, !writing else { return }
        let snapshot = fetch.snapshot(from: nextChunk)
        if case .failed(let error) = snapshot.outcome {
            if !headSent, let fallback {
                finish()
                fallback(error)
                return
            }
            if headSent { responder.abort() } else { responder.send(error: error) }
            finish()
            return
        }
        guard let head = snapshot.head else { return }
        if head.isPlaylist {
            responder.route = .playlist
            guard case .playlist(let playlist) = snapshot.outcome else { return }
            playlists.respond(with: playlist, to: responder, cache: "MISS")
            finish()
            return
        }
        if !headSent, !mayReceiveKeySized {
            // Known to be key-sized: refused. Of unknown length: held back until more than 16 bytes or the end came.
            let arrived = snapshot.offset + snapshot.chunks.reduce(0) { $0 + Int64($1.readableBytes) }
            let ended: Bool
            if case .complete = snapshot.outcome { ended = true } else { ended = false }
            if head.contentLength == KeySizedBody.size || (head.contentLength == nil && ended && arrived == KeySizedBody.size) {
                responder.send(error: KeySizedBody.refusal)
                finish()
                return
            }
            if head.contentLength == nil && !ended && arrived <= KeySizedBody.size { return }
        }
        if !headSent {
            sendHead(head)
            headSent = true
            if responder.request.isHead {
                responder.end()
                finish()
                return
            }
        }
        var offset = snapshot.offset
        var slices: [ByteBuffer] = []
        var consumedChunks = 0
        for chunk in snapshot.chunks {
            let chunkStart = offset
            offset += Int64(chunk.readableBytes)
            consumedChunks += 1
            if let slice = window(chunk, start: chunkStart), slice.readableBytes > 0 { slices.append(slice) }
        }
        let complete: Bool
        if case .complete = snapshot.outcome { complete = true } else { complete = false }
        let rangeDone = range.map { offset > $0.last } ?? false
        nextChunk += consumedChunks
        var last: EventLoopFuture<Void>?
        for (index, slice) in slices.enumerated() {
            last = responder.write(slice, flush: index == slices.count - 1)
        }
        if complete || rangeDone {
            responder.end()
            finish()
            return
        }
        guard let last else {
            if consumedChunks > 0 { fetch.progress(self, to: offset) }
            return
        }
        writing = true
        let consumed = offset
        last.whenComplete { [self] result in
            writing = false
            switch result {
            case .success:
                fetch.progress(self, to: consumed)
                pump()
            case .failure:
                responder.abort()
                finish()
            }
        }
    }

    private func window(_ chunk: ByteBuffer, start: Int64) -> ByteBuffer? {
        guard let range else { return chunk }
        let end = start + Int64(chunk.readableBytes)
        let from = max(start, range.first), to = min(end, range.last + 1)
        guard from < to else { return nil }
        return chunk.getSlice(at: chunk.readerIndex + Int(from - start), length: Int(to - from))
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

