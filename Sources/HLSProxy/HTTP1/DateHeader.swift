#if canImport(Glibc)
    import Glibc
#endif
import HLSCacheCore
import NIOConcurrencyHelpers
import NIOCore

/// The `Date` line every response carries (RFC 9110 §6.6.1), for one event loop: formatted when the second
/// changes, by a task on that loop, never per request (as nginx caches its time strings).
///
/// Only its event loop touches it after ``DateHeaders`` made it: its state is bound to that loop, with no lock.
final class DateLine: Sendable {
    fileprivate struct State {
        var line: ByteBuffer
        var lineAndEnd: ByteBuffer
        var next: Scheduled<Void>?
        var stopped = false
    }

    fileprivate let loop: any EventLoop
    fileprivate let state: NIOLoopBoundBox<State>

    /// `Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n`
    var line: ByteBuffer { state.value.line }
    /// ``line`` and the blank line that ends a head (sent after a head rendered earlier, ``HitReplay``).
    var lineAndEnd: ByteBuffer { state.value.lineAndEnd }

    fileprivate init(loop: any EventLoop) {
        self.loop = loop
        let (line, lineAndEnd) = Self.render()
        // Made off its loop (the server's set-up), before the loop can see it; touched only there afterwards.
        state = NIOLoopBoundBox.makeBoxSendingValue(State(line: line, lineAndEnd: lineAndEnd), eventLoop: loop)
    }

    fileprivate func update() {
        (state.value.line, state.value.lineAndEnd) = Self.render()
    }

    private static func render() -> (ByteBuffer, ByteBuffer) {
        let text = "Date: \(HTTPDate.format(Int64(time(nil))))\r\n"
        return (ByteBuffer(string: text), ByteBuffer(string: text + "\r\n"))
    }
}

/// One ``DateLine`` per event loop of the server's group, each renewed just after every second boundary.
final class DateHeaders: Sendable {
    private let lines: [ObjectIdentifier: DateLine]

    init(group: any EventLoopGroup) {
        var lines: [ObjectIdentifier: DateLine] = [:]
        for loop in group.makeIterator() {
            let line = DateLine(loop: loop)
            lines[ObjectIdentifier(loop)] = line
            loop.execute { Self.scheduleUpdate(of: line) }
        }
        self.lines = lines
    }

    /// The line of `eventLoop` (nil for a loop outside the group).
    func line(for eventLoop: any EventLoop) -> DateLine? {
        lines[ObjectIdentifier(eventLoop)]
    }

    /// Stops the updates (the server is done).
    func stop() {
        for (_, line) in lines {
            // Each line belongs to one loop; its task is cancelled there.
            line.loop.execute {
                line.state.value.stopped = true
                line.state.value.next?.cancel()
            }
        }
    }

    private static func scheduleUpdate(of line: DateLine) {
        guard !line.state.value.stopped else { return }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        // Just past the next second boundary, so the text changes with the second.
        let delay = TimeAmount.nanoseconds(1_000_000_000 - Int64(now.tv_nsec) + 1_000_000)
        line.state.value.next = line.loop.scheduleTask(in: delay) {
            line.update()
            scheduleUpdate(of: line)
        }
    }
}
