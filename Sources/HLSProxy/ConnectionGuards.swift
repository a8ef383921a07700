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

/// Sits in front of the HTTP decoder: once the first byte of a request head arrives, the whole head must
/// follow within `timeout`, or the connection is closed (slowloris). Idle keep-alive connections are the
/// idle timeout's business, not this one's.
///
/// One repeating check per connection (every `timeout / 4`) rather than a timer per request: arming and
/// cancelling a scheduled task for every request showed up on the cache-hit path.
final class RequestHeadTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    private enum State { case waitingForRequest, readingHead(since: NIODeadline), inRequest }
    private var state = State.waitingForRequest
    private let timeout: TimeAmount
    private var check: RepeatedTask?

    init(timeout: TimeAmount) {
        self.timeout = timeout
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
        let interval = TimeAmount.nanoseconds(max(timeout.nanoseconds / 4, 1_000_000))
        let bound = NIOLoopBound((handler: self, context: context), eventLoop: context.eventLoop)
        check = context.eventLoop.scheduleRepeatedTask(initialDelay: interval, delay: interval) { _ in
            let (handler, context) = bound.value
            if case .readingHead(let since) = handler.state, NIODeadline.now() - since >= handler.timeout {
                context.close(promise: nil)
            }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .waitingForRequest = state { state = .readingHead(since: .now()) }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let progress = event as? RequestProgressEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch progress {
        case .headReceived: state = .inRequest
        case .responseCompleted: state = .waitingForRequest
        }
        promise?.succeed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        check?.cancel()
        check = nil
        state = .inRequest
        context.fireChannelInactive()
    }
}
