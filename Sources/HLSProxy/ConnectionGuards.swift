import NIOConcurrencyHelpers
import NIOCore

/// Counts open client connections and refuses new ones above the limit (closed at once, before any read).
final class ConnectionLimiter: Sendable {
    private let open = NIOLockedValueBox(0)
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Takes a slot; false when the server is full.
    func acquire() -> Bool {
        open.withLockedValue { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    func release() {
        open.withLockedValue { $0 -= 1 }
    }

    var current: Int { open.withLockedValue { $0 } }
}

/// Sits in front of the HTTP decoder and enforces both connection timeouts with one repeating check per
/// connection (a quarter of the shorter timeout):
/// - once the first byte of a request head arrives, the whole head must follow within `headTimeout`
///   (slowloris);
/// - a connection with no request in progress is closed after `idleTimeout`.
///
/// One handler and one repeating task instead of NIO's IdleStateHandler plus a timer per request: both showed up
/// on the cache-hit path, where every read and write crosses every handler.
///
/// ``ProxyHTTPHandler`` calls ``requestHeadReceived()`` and ``responseCompleted()`` on it directly.
final class RequestHeadTimeoutHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum State { case idle(since: NIODeadline), readingHead(since: NIODeadline), inRequest }
    private var state = State.idle(since: .now())
    private let headTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private var check: RepeatedTask?

    init(timeout: TimeAmount, idleTimeout: TimeAmount = .seconds(60)) {
        self.headTimeout = timeout
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startChecking(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        startChecking(context: context)
        context.fireChannelActive()
    }

    private func startChecking(context: ChannelHandlerContext) {
        guard check == nil else { return }
        state = .idle(since: .now())
        let shorter = min(headTimeout.nanoseconds, idleTimeout.nanoseconds)
        let interval = TimeAmount.nanoseconds(max(shorter / 4, 1_000_000))
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let (handler, context) = bound.value
            let now = NIODeadline.now()
            switch handler.state {
            case .readingHead(let since) where now - since >= handler.headTimeout: context.close(promise: nil)
            case .idle(let since) where now - since >= handler.idleTimeout: context.close(promise: nil)
            default: break
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .idle = state { state = .readingHead(since: .now()) }
        context.fireChannelRead(data)
    }

    /// The request head is complete: no head timeout until the response is written.
    func requestHeadReceived() {
        state = .inRequest
    }

    /// The response is written: the connection is idle.
    func responseCompleted() {
        state = .idle(since: .now())
    }

    func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        state = .inRequest
        context.fireChannelInactive()
    }
}
