import HLSOrigin
import NIOConcurrencyHelpers
import NIOCore

/// Records what a stream delivers; optionally holds each chunk's future for `delay` to exert backpressure,
/// and notes any chunk that arrives while the previous future is still pending.
final class RecordingHandler: OriginStreamHandler {
    struct Record {
        var heads: [OriginResponseHead] = []
        var body: [UInt8] = []
        var chunks = 0
        var finishes: [Result<Void, OriginError>] = []
        var overlapping = 0
        var pending = false
        var callsAfterFinish = 0
    }

    let record = NIOLockedValueBox(Record())
    private let delay: TimeAmount?
    private let eventLoop: any EventLoop
    private let onHead: (@Sendable (OriginResponseHead) -> Void)?

    init(eventLoop: any EventLoop, delay: TimeAmount? = nil, onHead: (@Sendable (OriginResponseHead) -> Void)? = nil) {
        self.eventLoop = eventLoop
        self.delay = delay
        self.onHead = onHead
    }

    func didReceiveHead(_ head: OriginResponseHead) {
        eventLoop.preconditionInEventLoop()
        record.withLockedValue {
            if !$0.finishes.isEmpty { $0.callsAfterFinish += 1 }
            $0.heads.append(head)
        }
        onHead?(head)
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        eventLoop.preconditionInEventLoop()
        record.withLockedValue {
            if !$0.finishes.isEmpty { $0.callsAfterFinish += 1 }
            if $0.pending { $0.overlapping += 1 }
            $0.body += buffer.readableBytesView
            $0.chunks += 1
        }
        guard let delay else { return eventLoop.makeSucceededVoidFuture() }
        record.withLockedValue { $0.pending = true }
        return eventLoop.scheduleTask(in: delay) { [record] in
            record.withLockedValue { $0.pending = false }
        }.futureResult
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        eventLoop.preconditionInEventLoop()
        record.withLockedValue { $0.finishes.append(result) }
    }

    var snapshot: Record { record.withLockedValue { $0 } }

    /// The single error it finished with, if it finished with one.
    var error: OriginError? {
        guard case .failure(let error)? = snapshot.finishes.first else { return nil }
        return error
    }
}
