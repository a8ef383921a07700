#if canImport(Glibc)
    import Glibc
#endif
import NIOCore
import NIOPosix

/// "Go on after this event loop has looked at its sockets again": how a large body is written a slice at a time
/// between the loop's other I/O (``ProxyHTTPHandler``), so that a playlist request arriving behind a 2 MiB send is
/// answered after one slice, not after the whole body (nginx's `sendfile_max_chunk`).
///
/// NIO runs the tasks submitted while it runs tasks in the same tick, before it polls again, so `execute` cannot do
/// this: a chain of slices scheduled that way is written in one go. Here the loop polls a pipe of its own: a job
/// queued with ``afterNextPoll(_:)`` writes one byte to the pipe (once, however many jobs wait), and the jobs run when
/// the loop reads it — among the other sockets that poll found ready, whose requests are handled in the same pass.
/// Confined to its event loop (``NIOLoopBoundBox``); its only cost is a byte written and read per round of slices.
final class LoopYield: Sendable {
    private struct State {
        var jobs: [() -> Void] = []
        var armed = false
        var channel: (any Channel)?
        /// Closed (the server stopped): jobs run as ordinary tasks, so a response in flight still finishes.
        var closed = false
        /// Client connections open on this loop.
        var connections = 0
        /// Of those, the ones holding a large body they have not asked again since (``LargeSendHold``).
        var largeHolders = 0
    }

    let eventLoop: any EventLoop
    private let state: NIOLoopBoundBox<State>
    /// The pipe's write end (the read end belongs to the pipe channel).
    private let wakeDescriptor: CInt

    private init(eventLoop: any EventLoop, wakeDescriptor: CInt) {
        self.eventLoop = eventLoop
        self.wakeDescriptor = wakeDescriptor
        self.state = NIOLoopBoundBox.makeBoxSendingValue(State(), eventLoop: eventLoop)
    }

    /// A yield for `eventLoop`: a pipe whose read end is registered with the loop.
    static func make(on eventLoop: any EventLoop) -> EventLoopFuture<LoopYield> {
        var descriptors: [CInt] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            return eventLoop.makeFailedFuture(IOError(errnoCode: errno, reason: "pipe"))
        }
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        let (readEnd, writeEnd) = (descriptors[0], descriptors[1])
        let yield = LoopYield(eventLoop: eventLoop, wakeDescriptor: writeEnd)
        return NIOPipeBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(Waker(yield: yield))
                }
            }
            .takingOwnershipOfDescriptor(input: readEnd)
            .flatMapErrorThrowing { error in
                Glibc.close(readEnd)
                Glibc.close(writeEnd)
                throw error
            }
            .map { channel in
                yield.state.value.channel = channel
                return yield
            }
    }

    /// Runs `job` on the loop once it has polled its sockets again (and handled what that poll found).
    func afterNextPoll(_ job: @escaping () -> Void) {
        eventLoop.preconditionInEventLoop()
        guard !state.value.closed else {
            let bound = NIOLoopBound(job, eventLoop: eventLoop)
            eventLoop.execute { bound.value() }
            return
        }
        state.value.jobs.append(job)
        guard !state.value.armed else { return }
        state.value.armed = true
        var byte: UInt8 = 1
        // The pipe cannot be full: at most one byte is in it.
        _ = write(wakeDescriptor, &byte, 1)
    }

    /// Whether jobs are waiting (tests).
    var isArmed: Bool { state.value.armed }

    /// A client connection opened on this loop.
    func connectionOpened() { state.value.connections += 1 }

    /// A client connection on this loop closed.
    func connectionClosed() { state.value.connections -= 1 }

    /// A connection on this loop began or stopped holding a large body (``LargeSendHold``).
    func largeHolderChanged(by change: Int) {
        guard eventLoop.inEventLoop else {
            eventLoop.execute { self.state.value.largeHolders += change }
            return
        }
        state.value.largeHolders += change
    }

    /// Whether every client connection on this loop holds a large body: none of them waits here for a small answer
    /// (a playlist), so a cold copy written from memory takes the loop's time and caches from nobody who would
    /// notice (``MemoryTier/bodyToSend(of:on:alone:headOnly:counted:)``).
    var carriesOnlyLargeSends: Bool { state.value.largeHolders >= state.value.connections }

    /// Whether another connection shares this loop: only then is a large body worth cutting into slices. Alone on
    /// its loop a connection waits for nobody, and each slice cost a wake-up and a send more (70–150 µs of CPU per
    /// 2 MiB hit at 1 connection, docs/benchmarks.md).
    var isShared: Bool { state.value.connections > 1 }

    /// The loop read the pipe: run what waited (jobs queued now wait for the next poll).
    fileprivate func polled() {
        state.value.armed = false
        let jobs = state.value.jobs
        state.value.jobs = []
        for job in jobs { job() }
    }

    /// Closes the pipe (the server stopped); jobs waiting, and any queued later, run as ordinary tasks.
    func close() -> EventLoopFuture<Void> {
        eventLoop.flatSubmit {
            guard !self.state.value.closed else { return self.eventLoop.makeSucceededVoidFuture() }
            self.state.value.closed = true
            let channel = self.state.value.channel
            self.state.value.channel = nil
            let jobs = self.state.value.jobs
            self.state.value.jobs = []
            for job in jobs {
                let bound = NIOLoopBound(job, eventLoop: self.eventLoop)
                self.eventLoop.execute { bound.value() }
            }
            Glibc.close(self.wakeDescriptor)
            return channel?.close() ?? self.eventLoop.makeSucceededVoidFuture()
        }
    }

    private final class Waker: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let yield: LoopYield

        init(yield: LoopYield) { self.yield = yield }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {}

        func channelReadComplete(context: ChannelHandlerContext) {
            yield.polled()
        }
    }
}
