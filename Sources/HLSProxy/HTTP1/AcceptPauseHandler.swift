import NIOCore

/// On the listening channel: when `accept(2)` fails (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`, `ECONNABORTED`), or
/// when `refuse` turns away a connection just accepted (descriptors running low: ``DescriptorHeadroom``), stops
/// reading it for a moment, then reads again. A refused connection is closed before it reaches its event loop; the
/// check runs here, on the listener's loop, in the order the connections were accepted, so a burst of accepts is
/// stopped after its current batch (a check in the child's initializer ran behind the listener, which kept accepting
/// until `accept(2)` failed).
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
    private let refuse: () -> TimeAmount?
    private var resume: Scheduled<Void>?

    /// - Parameters:
    ///   - pause: called on each failure (to count and report it); how long to stop accepting.
    ///   - refuse: called for each connection accepted: nil keeps it; else it is closed (counted and reported there)
    ///     and accepting stops for the time returned.
    init(pause: @escaping (IOError) -> TimeAmount, refuse: @escaping () -> TimeAmount? = { nil }) {
        self.pause = pause
        self.refuse = refuse
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let amount = refuse() else {
            context.fireChannelRead(data)
            return
        }
        unwrapInboundIn(data).close(promise: nil)
        stopAccepting(context: context, for: amount)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        guard let failure = error as? IOError else {
            context.fireErrorCaught(error)
            return
        }
        stopAccepting(context: context, for: pause(failure))
    }

    /// Takes the listener out of epoll for `amount` (unless it already is).
    private func stopAccepting(context: ChannelHandlerContext, for amount: TimeAmount) {
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
