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
final class RequestHeadTimeoutHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = Any
    typealias OutboundOut = Any

    private enum State { case waitingForRequest, readingHead(Scheduled<Void>), inRequest }
    private var state = State.waitingForRequest
    private let timeout: TimeAmount

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .waitingForRequest = state {
            let channel = context.channel
            let deadline = context.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
            state = .readingHead(deadline)
        }
        context.fireChannelRead(data)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let progress = event as? RequestProgressEvent else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        switch progress {
        case .headReceived:
            if case .readingHead(let deadline) = state { deadline.cancel() }
            state = .inRequest
        case .responseCompleted:
            if case .readingHead(let deadline) = state { deadline.cancel() }
            state = .waitingForRequest
        }
        promise?.succeed()
    }

    func channelInactive(context: ChannelHandlerContext) {
        if case .readingHead(let deadline) = state { deadline.cancel() }
        state = .inRequest
        context.fireChannelInactive()
    }
}
