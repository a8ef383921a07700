import HLSCacheCore
import HLSOrigin
import NIOCore
import NIOHTTP1

/// Relays one origin response (a Range request on a miss) straight to the client, without caching.
final class PassthroughRelay: OriginStreamHandler, @unchecked Sendable {
    private let responder: Responder
    private let url: OriginURL
    private let onPlaylist: () -> Void
    private let metrics: ProxyMetrics
    /// Whether this client may receive a 16-byte body (``KeySizedBody``).
    private let mayReceiveKeySized: Bool
    private let startedAt = ContinuousClock.now
    private var headSent = false
    /// A playlist handed to the whole-playlist path, or a key-sized answer refused: the client is answered.
    private var handedOver = false
    /// A head that may belong to a playlist its type does not announce, held until the first bytes tell.
    private var held: OriginResponseHead?
    private var sniffer = PlaylistSniffer()

    private init(responder: Responder, url: OriginURL, metrics: ProxyMetrics, mayReceiveKeySized: Bool, onPlaylist: @escaping () -> Void) {
        self.responder = responder
        self.url = url
        self.metrics = metrics
        self.mayReceiveKeySized = mayReceiveKeySized
        self.onPlaylist = onPlaylist
    }

    /// - Parameter onPlaylist: called instead of relaying when the origin's answer is a playlist.
    static func start(
        request: ProxyRequest, url: OriginURL, range: String, responder: Responder, services: ProxyServices,
        onPlaylist: @escaping () -> Void
    ) {
        let relay = PassthroughRelay(
            responder: responder, url: url, metrics: services.metrics,
            mayReceiveKeySized: KeySizedBody.mayReceive(request, services: services),
            onPlaylist: onPlaylist)
        var headers: [(String, String)] = [("Range", range)]
        if let ifRange = request.header("If-Range") { headers.append(("If-Range", ifRange)) }
        let task = services.origin.stream(url, headers: headers, on: responder.eventLoop, handler: relay)
        responder.whenCancelled { task.cancel() }
    }

    func didReceiveHead(_ head: OriginResponseHead) {
        metrics.originResponded(after: ContinuousClock.now - startedAt)
        switch OriginHeadClassifier.range(head, url: url) {
        case .playlist:
            handedOver = true
            onPlaylist()
        case .sniff:
            held = head
        case .media:
            sendHead(head)
        }
    }

    private func sendHead(_ head: OriginResponseHead) {
        if let error = OriginHeadClassifier.rangeFailure(head, url: url) {
            metrics.originFailed(code: error.code)
            responder.send(error: error)
            return
        }
        // A part of a 16-byte resource is a part of a key, as far as anyone can tell (KeySizedBody).
        if !mayReceiveKeySized, KeySizedBody.isKeySized(status: head.status, headers: head.headers) {
            handedOver = true
            responder.send(error: KeySizedBody.refusal)
            return
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
        headSent = true
        responder.beginStream(status: HTTPResponseStatus(statusCode: head.status), headers: headers)
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        if held != nil {
            guard let isPlaylist = sniffer.feed(buffer) else { return responder.eventLoop.makeSucceededVoidFuture() }
            return release(isPlaylist: isPlaylist)
        }
        guard headSent else {
            // Handed over (a playlist) or already answered with an error: stop reading.
            return responder.eventLoop.makeFailedFuture(OriginError.cancelled)
        }
        return responder.write(buffer)
    }

    /// Hands a sniffed playlist over, or sends the held head and the bytes that arrived meanwhile.
    private func release(isPlaylist: Bool) -> EventLoopFuture<Void> {
        guard let head = held else { return responder.eventLoop.makeSucceededVoidFuture() }
        held = nil
        if isPlaylist {
            handedOver = true
            onPlaylist()
            return responder.eventLoop.makeFailedFuture(OriginError.cancelled)  // stop reading the raw playlist
        }
        sendHead(head)
        guard headSent else { return responder.eventLoop.makeFailedFuture(OriginError.cancelled) }
        let body = sniffer.take()
        var last = responder.eventLoop.makeSucceededVoidFuture()
        for chunk in body { last = responder.write(chunk) }
        return last
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        if held != nil, case .success = result {
            _ = release(isPlaylist: sniffer.decisionAtEnd)
        }
        guard !handedOver else { return }
        switch result {
        case .success:
            if headSent { responder.end() }
        case .failure(let error):
            metrics.originFailed(code: error.code)
            if headSent { responder.abort() } else { responder.send(error: error) }
        }
    }
}
