import HLSCacheCore
import HLSOrigin
import NIOCore
import NIOHTTP1

/// Relays one origin response (a Range request on a miss) straight to the client, without caching: runs the effects
/// its ``PassthroughRelayStateMachine`` decides. Every callback runs on the client's event loop (the origin stream is
/// started on it), which is what confines the machine.
final class PassthroughRelay: OriginStreamHandler {
    private let responder: Responder
    private let onPlaylist: NIOLoopBound<() -> Void>
    private let metrics: ProxyMetrics
    private let startedAt = ContinuousClock.now
    private let machine: NIOLoopBoundBox<PassthroughRelayStateMachine>

    private init(responder: Responder, url: OriginURL, metrics: ProxyMetrics, mayReceiveKeySized: Bool, onPlaylist: @escaping () -> Void) {
        self.responder = responder
        self.metrics = metrics
        self.onPlaylist = NIOLoopBound(onPlaylist, eventLoop: responder.eventLoop)
        machine = NIOLoopBoundBox.makeBoxSendingValue(
            PassthroughRelayStateMachine(url: url, mayReceiveKeySized: mayReceiveKeySized), eventLoop: responder.eventLoop)
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
        _ = run(machine.value.receivedHead(head))
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        run(machine.value.receivedBody(buffer))
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        _ = run(machine.value.finished(result))
    }

    /// Runs `effects` in order; returns when the origin may be read again (the last write taken), or a failed future
    /// to stop reading.
    private func run(_ effects: [PassthroughRelayStateMachine.Effect]) -> EventLoopFuture<Void> {
        var next = responder.eventLoop.makeSucceededVoidFuture()
        for effect in effects {
            switch effect {
            case .handOverPlaylist:
                onPlaylist.value()
            case .sendHead(let status, let headers):
                responder.beginStream(status: status, headers: headers)
            case .write(let buffer):
                next = responder.write(buffer)
            case .end:
                responder.end()
            case .answerOriginError(let error):
                metrics.originFailed(code: error.code)
                responder.send(error: error)
            case .refuse(let error):
                responder.send(error: error)
            case .fail(let error):
                metrics.originFailed(code: error.code)
                responder.send(error: error)
            case .abort(let error):
                metrics.originFailed(code: error.code)
                responder.abort()
            case .stopReading:
                next = responder.eventLoop.makeFailedFuture(OriginError.cancelled)
            }
        }
        return next
    }
}
