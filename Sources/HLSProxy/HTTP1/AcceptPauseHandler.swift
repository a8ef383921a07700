import NIOCore

/// On the listening channel: when `accept(2)` fails (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`, `ECONNABORTED`), stops
/// reading it for `pause`, then reads again.
///
/// NIO's `AcceptBackoffHandler` does not stop a failing listener: it delays the *next* `read()`, but a batch whose
/// first `accept(2)` fails leaves the channel's read pending and its socket registered for readability, so the
/// level-triggered epoll wakes the loop at once and `accept(2)` fails again — 83,000 failed calls in 8 seconds, a core
/// at full speed serving nobody for as long as the shortage lasts. Turning `autoRead` off unregisters the socket from
/// epoll whatever the read state; turning it back on registers it again and reads.
final class AcceptPauseHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Channel
    typealias InboundOut = Channel

    private let pause: (IOError) -> TimeAmount
    private var resume: Scheduled<Void>?

    /// - Parameter pause: called on each failure (to count and report it); how long to stop accepting.
    init(pause: @escaping (IOError) -> TimeAmount) {
        self.pause = pause
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let failure = error as? IOError else {
            context.fireErrorCaught(error)
            return
        }
        let amount = pause(failure)
        guard resume == nil, let options = context.channel.syncOptions else { return }
        try? options.setOption(.autoRead, value: false)
        let loop = context.eventLoop.assumeIsolated()
        resume = loop.scheduleTask(in: amount) { [self] in
            resume = nil
            try? context.channel.syncOptions?.setOption(.autoRead, value: true)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        resume?.cancel()
        resume = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        guard let resume else { return }
        resume.cancel()
        self.resume = nil
        try? context.channel.syncOptions?.setOption(.autoRead, value: true)
    }
}
