import HLSProxy
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// One `/events` subscriber. The hub enqueues from any thread without waiting; the stream writes on its
/// connection's event loop, one write at a time (the next only when the kernel took the previous one), so a client
/// that does not read holds at most `capacity` events plus one write in memory and never slows anyone else.
///
/// When the buffer is full, a new progress event replaces the queued one of the same item or the oldest queued
/// progress event; if only state changes are queued, the subscriber is disconnected (it reconnects and reads
/// `/items` again — losing a state change silently would leave it with a wrong picture).
final class EventStream: Sendable {
    private struct Queue {
        var events: [AdminEvent] = []
        var writing = false
        var heartbeat = false
        var closed = false
        /// The server stops: the response ends once the queue is written (``finish()``).
        var ending = false
        var dropped = 0
    }

    let responder: ProxyResponder
    let capacity: Int
    /// The events this subscriber asked for (`?item=`, `?type=`).
    let filter: EventFilter
    private let queue = NIOLockedValueBox(Queue())
    private let onClose: @Sendable (EventStream) -> Void

    init(
        responder: ProxyResponder, capacity: Int, filter: EventFilter = EventFilter(),
        onClose: @escaping @Sendable (EventStream) -> Void
    ) {
        self.filter = filter
        self.responder = responder
        self.capacity = max(1, capacity)
        self.onClose = onClose
    }

    /// Sends the head, the first comment and `first` (the server's `started`), and notices the client going away.
    func start(first: [AdminEvent] = []) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream; charset=utf-8")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "X-Accel-Buffering", value: "no")
        responder.beginStream(status: .ok, headers: headers)
        responder.whenClosed { [self] in close(abort: false) }
        var hello = ByteBuffer()
        hello.writeString("retry: 2000\n: hlscache events\n\n")
        for event in first { event.write(to: &hello) }
        queue.withLockedValue { $0.writing = true }
        write(hello)
    }

    /// Events waiting to be written (bounded by `capacity`).
    var backlog: Int { queue.withLockedValue { $0.events.count } }
    /// Progress events dropped or coalesced because the subscriber did not keep up.
    var dropped: Int { queue.withLockedValue { $0.dropped } }

    func enqueue(_ event: AdminEvent) {
        let (schedule, overflow) = queue.withLockedValue { q -> (Bool, Bool) in
            guard !q.closed else { return (false, false) }
            if event.isCoalescable,
                let same = q.events.firstIndex(where: { $0.isCoalescable && $0.type == event.type && $0.id == event.id })
            {
                q.events[same] = event
                q.dropped += 1
                return (false, false)
            }
            if q.events.count >= capacity {
                if let oldest = q.events.firstIndex(where: { $0.isCoalescable }) {
                    q.events.remove(at: oldest)
                    q.dropped += 1
                } else if event.isCoalescable {
                    q.dropped += 1
                    return (false, false)
                } else {
                    q.closed = true
                    return (false, true)
                }
            }
            q.events.append(event)
            if q.writing { return (false, false) }
            q.writing = true
            return (true, false)
        }
        if overflow {
            responder.abort()
            onClose(self)
        } else if schedule {
            responder.eventLoop.execute { [self] in drain() }
        }
    }

    /// A comment line, so a connection nobody reads any more is noticed (its writes fail once it is gone).
    func ping() {
        let schedule = queue.withLockedValue { q -> Bool in
            guard !q.closed else { return false }
            q.heartbeat = true
            if q.writing { return false }
            q.writing = true
            return true
        }
        if schedule { responder.eventLoop.execute { [self] in drain() } }
    }

    private func drain() {
        let (events, heartbeat, end) = queue.withLockedValue { q -> ([AdminEvent], Bool, Bool) in
            let taken = (q.events, q.heartbeat)
            q.events.removeAll(keepingCapacity: true)
            q.heartbeat = false
            guard taken.0.isEmpty && !taken.1 else { return (taken.0, taken.1, false) }
            q.writing = false
            guard q.ending && !q.closed else { return ([], false, false) }
            q.closed = true
            return ([], false, true)
        }
        if end {
            responder.end()
            onClose(self)
            return
        }
        guard !events.isEmpty || heartbeat else { return }
        var buffer = ByteBuffer()
        if heartbeat { buffer.writeString(": ping\n\n") }
        for event in events { event.write(to: &buffer) }
        write(buffer)
    }

    private func write(_ buffer: ByteBuffer) {
        responder.write(buffer).whenComplete { [self] result in
            switch result {
            case .success: drain()
            case .failure: close(abort: true)
            }
        }
    }

    /// Whether the subscription ended.
    var isClosed: Bool { queue.withLockedValue { $0.closed } }

    /// Ends the response once everything queued is written (the server stops); nothing new is queued after the
    /// events already sent to it.
    func finish() {
        let endNow = queue.withLockedValue { q -> Bool in
            guard !q.closed, !q.ending else { return false }
            q.ending = true
            guard !q.writing else { return false }  // the drain ends it when the queue is written
            q.closed = true
            return true
        }
        if endNow {
            responder.end()
            onClose(self)
        }
    }

    /// Ends the subscription (client gone, write failed, server stopping).
    func close(abort: Bool) {
        let first = queue.withLockedValue { q -> Bool in
            defer { q.closed = true }
            q.events.removeAll()
            return !q.closed
        }
        guard first else { return }
        if abort { responder.abort() }
        onClose(self)
    }
}
