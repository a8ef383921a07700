import HLSCacheCore
import HLSOrigin
import NIOCore

/// Read-ahead through a fleet's balancer (`prefetch.through`): instead of fetching the next segments itself, a node
/// asks the balancer for their proxy paths, so each segment is fetched and stored by the node the balancer hashes it
/// to (the one that will serve it), and the origin sees it once across the fleet. The body is read and dropped.
///
/// The request carries ``marker``: the node answering it does not read ahead from it, so one player's read-ahead
/// does not cascade across the fleet. At most one request per segment is in flight from this node (kept in
/// ``FetchRegistry``).
final class ReadAheadThrough: Sendable {
    /// Header on read-ahead requests sent through the balancer.
    static let marker = "X-HLSCache-Read-Ahead"

    let server: String

    init(server: String) {
        self.server = server
    }

    /// Requests `segment` through the balancer unless this node already asks for it.
    func request(_ segment: ReadAheadIndex.Segment, services: ProxyServices) {
        guard let url = try? OriginURL(server + segment.url.proxyPath) else { return }
        let key = segment.key.value
        let fetches = services.fetches
        guard fetches.beginThroughBalancer(key) else { return }
        let loop = services.group.next()
        let logger = services.logger
        let sink = DiscardingSink(eventLoop: loop) { result in
            fetches.endThroughBalancer(key)
            if case .failure(let error) = result {
                logger.debug("read-ahead through the balancer failed", metadata: ["url": "\(url)", "error": "\(error)"])
            }
        }
        services.origin.stream(url, headers: [(Self.marker, "1")], on: loop, handler: sink)
    }

    /// Whether `request` is a read-ahead sent through the balancer by a node (no read-ahead follows it).
    static func isReadAhead(_ request: ProxyRequest) -> Bool {
        request.header(marker) != nil
    }
}

/// Reads a response to its end and drops the bytes (the node that answered stores them).
private final class DiscardingSink: OriginStreamHandler {
    let eventLoop: any EventLoop
    let done: @Sendable (Result<Void, OriginError>) -> Void

    init(eventLoop: any EventLoop, done: @escaping @Sendable (Result<Void, OriginError>) -> Void) {
        self.eventLoop = eventLoop
        self.done = done
    }

    func didReceiveHead(_ head: OriginResponseHead) {}

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        eventLoop.makeSucceededVoidFuture()
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        done(result)
    }
}
