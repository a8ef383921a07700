import NIOConcurrencyHelpers
import NIOCore
import Synchronization

/// Counts open client connections and refuses new ones above the limit (closed at once, before any read).
final class ConnectionLimiter: Sendable {
    private let open = Atomic<Int>(0)
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Takes a slot; false when the server is full.
    func acquire() -> Bool {
        var count = open.load(ordering: .relaxed)
        while count < limit {
            let (exchanged, found) = open.compareExchange(expected: count, desired: count + 1, ordering: .relaxed)
            if exchanged { return true }
            count = found
        }
        return false
    }

    func release() {
        open.wrappingSubtract(1, ordering: .relaxed)
    }

    var current: Int { open.load(ordering: .relaxed) }
}

/// Sits in front of the HTTP decoder and enforces the connection timeouts (``ConnectionTimeouts`` decides; this
/// handler feeds it the reads and the handler's events, and runs one repeating check per connection, every quarter of
/// the shortest timeout, closing the connection when the check says a timeout expired).
///
/// One handler and one repeating task instead of NIO's IdleStateHandler plus a timer per request: both showed up
/// on the cache-hit path, where every read and write crosses every handler. Nothing here reads the channel per
/// request: the request events only set the state, the check does the rest.
final class ConnectionTimeoutHandler: ChannelInboundHandler, RemovableChannelHandler, ConnectionTimeoutEvents {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private var timeouts: ConnectionTimeouts
    private var check: RepeatedTask?
    /// The clock the timeouts are measured by (tests move it by hand; the checks still run on the event loop's).
    private let now: @Sendable () -> NIODeadline

    init(
        headTimeout: TimeAmount, bodyTimeout: TimeAmount = .seconds(10), sendTimeout: TimeAmount = .seconds(60),
        idleTimeout: TimeAmount = .seconds(60), clock: @escaping @Sendable () -> NIODeadline = { .now() }
    ) {
        self.now = clock
        self.timeouts = ConnectionTimeouts(
            limits: ConnectionTimeouts.Limits(head: headTimeout, body: bodyTimeout, send: sendTimeout, idle: idleTimeout), now: clock())
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { startChecking(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        replayFront = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        startChecking(context: context)
        context.fireChannelActive()
    }

    private func startChecking(context: ChannelHandlerContext) {
        guard check == nil else { return }
        timeouts.connected(at: now())
        let interval = timeouts.checkInterval
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let (handler, context) = bound.value
            let expired = handler.timeouts.check(at: handler.now()) {
                (try? context.channel.syncOptions?.getOption(.bufferedWritableBytes)) ?? 0
            }
            if expired != nil { context.close(promise: nil) }
        }
    }

    /// The request decoder behind, asked first whether a read is a head answered as before (``RequestDecoder/replayWhole(_:)``).
    /// Strong, as the decoder's own reference to the handler; let go when the connection closes.
    var replayFront: RequestDecoder?

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        timeouts.bytesRead(at: now())
        if let replayFront, replayFront.replayWhole(unwrapInboundIn(data)) { return }
        context.fireChannelRead(data)
    }

    /// The timeout that runs now (``ConnectionTimeouts/phase``); on the channel's event loop.
    var phase: ConnectionTimeouts.Expired? { timeouts.phase }

    func requestHeadReceived(awaitingBody: Bool) {
        timeouts.requestHeadReceived(awaitingBody: awaitingBody)
    }

    func requestReceived() {
        timeouts.requestReceived()
    }

    func responseCompleted() {
        timeouts.responseCompleted(at: now())
    }

    func queued(bytes: Int) {
        timeouts.queued(bytes: bytes)
    }

    func channelInactive(context: ChannelHandlerContext) {
        replayFront = nil
        check?.cancel()
        check = nil
        timeouts.closed()
        context.fireChannelInactive()
    }
}
