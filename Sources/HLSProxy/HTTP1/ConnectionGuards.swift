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

/// Sits in front of the HTTP decoder and enforces the connection timeouts with one repeating check per connection
/// (a quarter of the shortest timeout):
/// - once the first byte of a request head arrives, the whole head must follow within `headTimeout` (slowloris);
/// - while a request body is expected, no more than `bodyTimeout` may pass without a byte of it;
/// - while response bytes wait to be sent, the client must take some within `sendTimeout` (a client that stops
///   reading; nginx's `send_timeout`). Progress is what the kernel accepted, measured from the channel's buffered
///   bytes, so a large `sendfile` that a slow client reads steadily is never cut off;
/// - a connection with no request in progress is closed after `idleTimeout`.
///
/// One handler and one repeating task instead of NIO's IdleStateHandler plus a timer per request: both showed up
/// on the cache-hit path, where every read and write crosses every handler. Nothing here reads a clock or the
/// channel per request: the request events only set the state, the check does the rest.
///
/// ``ProxyHTTPHandler`` calls ``requestHeadReceived(awaitingBody:)``, ``requestReceived()``,
/// ``responseCompleted()`` and ``queued(bytes:)`` on it directly.
final class ConnectionTimeoutHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private enum State {
        case idle(since: NIODeadline)
        case readingHead(since: NIODeadline)
        /// The head is in, the rest of the request is not; `since` is the last byte (nil: none yet, the next check
        /// starts the clock).
        case readingBody(since: NIODeadline?)
        case inRequest
    }
    private var state = State.idle(since: .now())
    private let headTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    private let sendTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    private var check: RepeatedTask?
    /// Response bytes handed to the channel so far.
    private var queuedBytes: Int64 = 0
    /// Response bytes the kernel had taken at the last check that saw any waiting.
    private var sentBytes: Int64 = 0
    /// Since when bytes have waited without any being sent (nil: none waiting at the last check).
    private var stalledSince: NIODeadline?

    init(
        headTimeout: TimeAmount, bodyTimeout: TimeAmount = .seconds(10), sendTimeout: TimeAmount = .seconds(60),
        idleTimeout: TimeAmount = .seconds(60)
    ) {
        self.headTimeout = headTimeout
        self.bodyTimeout = bodyTimeout
        self.sendTimeout = sendTimeout
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
        let shortest = [headTimeout, bodyTimeout, sendTimeout, idleTimeout].map(\.nanoseconds).min()!
        let interval = TimeAmount.nanoseconds(max(shortest / 4, 1_000_000))
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let (handler, context) = bound.value
            if handler.isOverdue(now: .now(), context: context) { context.close(promise: nil) }
        }
    }

    private func isOverdue(now: NIODeadline, context: ChannelHandlerContext) -> Bool {
        switch state {
        case .readingHead(let since) where now - since >= headTimeout: return true
        case .idle(let since) where now - since >= idleTimeout: return true
        case .readingBody(let since?) where now - since >= bodyTimeout: return true
        case .readingBody(nil): state = .readingBody(since: now)
        default: break
        }
        // Nothing handed over since the last check found everything sent: nothing can be waiting.
        guard queuedBytes != sentBytes || stalledSince != nil else { return false }
        let buffered = (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
        let sent = queuedBytes - Int64(buffered)
        if buffered == 0 {
            stalledSince = nil
        } else if stalledSince == nil || sent > sentBytes {
            stalledSince = now
        } else if let stalledSince, now - stalledSince >= sendTimeout {
            return true
        }
        sentBytes = sent
        return false
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch state {
        case .idle: state = .readingHead(since: .now())
        case .readingBody: state = .readingBody(since: .now())
        default: break
        }
        context.fireChannelRead(data)
    }

    /// The request head is complete: no head timeout until the response is written; the body timeout while the rest
    /// of the request (`awaitingBody`: it was accepted and has not ended) is read.
    func requestHeadReceived(awaitingBody: Bool) {
        state = awaitingBody ? .readingBody(since: nil) : .inRequest
    }

    /// The request is complete (its body is in): it is being answered.
    func requestReceived() {
        state = .inRequest
    }

    /// The response is written: the connection is idle.
    func responseCompleted() {
        state = .idle(since: .now())
    }

    /// `bytes` more response bytes were handed to the channel.
    func queued(bytes: Int) {
        queuedBytes &+= Int64(bytes)
    }

    func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        state = .inRequest
        context.fireChannelInactive()
    }
}
