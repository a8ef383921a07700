import HLSCacheCore
import NIOCore
import NIOHTTP1

/// A layer above the proxy (the admin API in `HLSAdmin`) that answers requests for `/api/…` and `/`, and is told
/// about the responses to proxied origin resources (for playback records and the hit ratio).
///
/// The proxy does not know what the extension does: it hands over the complete request (head, peer address and a
/// body of at most 64 KiB; larger ones were already answered with 413) and a ``ProxyResponder``.
package protocol ProxyRouteExtension: Sendable {
    /// Answers a request for `/`, `/api` or a path under `/api/`. Called on the connection's event loop: must not
    /// block (run SQLite and file work on a thread pool and answer through `responder` from anywhere).
    func handle(_ request: ProxyRequest, responder: ProxyResponder)

    /// The head of a response to any other request (proxied resources, `/keys/`, `/healthz`) is being written:
    /// `headers` include `X-Cache: HIT|MISS` for proxied resources. Called on the event loop for every response,
    /// so it must be cheap (record and return). `shard`: the index of that event loop among the server's, so that
    /// what is recorded per loop need not be shared between them (``ShardedCounts``).
    func didRespond(to request: ProxyRequest, status: HTTPResponseStatus, headers: HTTPHeaders, shard: Int)

    /// Called once by the ``ProxyServer`` this extension is given to, with the server's metrics (the admin API
    /// samples ``ProxyMetrics/traffic`` for its history). Does nothing unless implemented.
    func attach(to metrics: ProxyMetrics)
}

extension ProxyRouteExtension {
    package func attach(to metrics: ProxyMetrics) {}
}

/// How a ``ProxyRouteExtension`` answers: once with a complete response, or with a stream that stays open until
/// ``end()`` (Server-Sent Events). Every method may be called from any thread; it hops to the connection's event
/// loop. After the connection went away the methods do nothing (writes fail).
package final class ProxyResponder: Sendable {
    private let responder: Responder

    init(_ responder: Responder) {
        self.responder = responder
    }

    /// The connection's event loop.
    package var eventLoop: any EventLoop { responder.eventLoop }

    /// Sends a complete response (for HEAD requests without the body). Adds `Content-Length`.
    package func send(status: HTTPResponseStatus, headers: HTTPHeaders, body: ByteBuffer) {
        let responder = self.responder
        var complete = headers
        complete.replaceOrAdd(name: "Content-Length", value: String(body.readableBytes))
        let finalHeaders = complete
        run { responder.send(status: status, headers: finalHeaders, body: .bytes(body)) }
    }

    /// Sends an error as the proxy's JSON error body (`{"error":code,"message":…}`) with its status.
    package func send(error: some HTTPMappableError, extraHeaders: HTTPHeaders = [:]) {
        let responder = self.responder
        run { responder.send(error: error, extraHeaders: extraHeaders) }
    }

    /// Starts a response whose body follows in ``write(_:)`` calls (no `Content-Length`: chunked).
    package func beginStream(status: HTTPResponseStatus, headers: HTTPHeaders) {
        let responder = self.responder
        run { responder.beginStream(status: status, headers: headers) }
    }

    /// Writes and flushes a body chunk. The future completes when the bytes were handed to the kernel: a caller
    /// that waits for it before writing more never queues more than one chunk for a client that does not read.
    package func write(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let responder = self.responder
        if responder.eventLoop.inEventLoop { return responder.write(buffer) }
        return responder.eventLoop.flatSubmit { responder.write(buffer) }
    }

    /// Ends a streamed response.
    package func end() {
        let responder = self.responder
        run { responder.end() }
    }

    /// Closes the connection (a stream that cannot continue).
    package func abort() {
        let responder = self.responder
        run { responder.abort() }
    }

    /// `callback` runs (on the event loop) when the connection closes before the response ended.
    package func whenClosed(_ callback: @escaping @Sendable () -> Void) {
        let responder = self.responder
        run { responder.whenCancelled(callback) }
    }

    private func run(_ body: @escaping @Sendable () -> Void) {
        if responder.eventLoop.inEventLoop {
            body()
        } else {
            responder.eventLoop.execute(body)
        }
    }
}
