import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import HLSOrigin

/// The per-host queue in front of the connection pool: first come first served, a waiter that is cancelled leaves
/// the line, one that waits too long fails with `busy`, and hosts do not share slots. Outcomes follow from events
/// (a release, a cancellation); the one time limit in play is the wait limit under test, far from any bound.
@Suite struct OriginConnectionSlotsTests {
    static let loop = MultiThreadedEventLoopGroup.singleton.next()

    /// Waits (bounded, 60 s) until `slots` has `count` requests waiting.
    static func waitUntilWaiting(_ slots: OriginConnectionSlots, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while slots.statistics.waiting != count && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(slots.statistics.waiting == count)
    }

    @Test func waitersAreServedInOrderAsSlotsComeFree() async throws {
        let slots = OriginConnectionSlots(limit: 1, waitLimit: .seconds(600))
        try await slots.acquire("http://a", timerOn: Self.loop)
        try await slots.acquire("http://b", timerOn: Self.loop)  // another host has slots of its own
        let order = NIOLockedValueBox<[Int]>([])
        var waiters: [Task<Void, any Error>] = []
        for index in 0..<3 {
            waiters.append(
                Task {
                    try await slots.acquire("http://a", timerOn: Self.loop)
                    order.withLockedValue { $0.append(index) }
                })
            try await Self.waitUntilWaiting(slots, index + 1)
        }
        for served in 1...3 {
            slots.release("http://a")
            try await waiters[served - 1].value
            #expect(order.withLockedValue { $0 } == Array(0..<served))
        }
        #expect(slots.statistics == OriginConnectionSlots.Statistics(waits: 3, timeouts: 0, waiting: 0))
    }

    @Test func aCancelledWaiterLeavesTheLine() async throws {
        let slots = OriginConnectionSlots(limit: 1, waitLimit: .seconds(600))
        try await slots.acquire("http://a", timerOn: Self.loop)
        let cancelled = Task { try await slots.acquire("http://a", timerOn: Self.loop) }
        try await Self.waitUntilWaiting(slots, 1)
        let next = Task { try await slots.acquire("http://a", timerOn: Self.loop) }
        try await Self.waitUntilWaiting(slots, 2)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        try await Self.waitUntilWaiting(slots, 1)
        // The slot goes to the one still waiting, not to the cancelled one.
        slots.release("http://a")
        try await next.value
        #expect(slots.statistics.waiting == 0)
        // And a task cancelled before it even asks fails at once, holding nothing.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await slots.acquire("http://a", timerOn: Self.loop)
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        slots.release("http://a")
        try await slots.acquire("http://a", timerOn: Self.loop)
    }

    @Test func aWaiterGivesUpAfterTheWaitLimitWithBusy() async throws {
        let slots = OriginConnectionSlots(limit: 1, waitLimit: .milliseconds(50))
        try await slots.acquire("http://a", timerOn: Self.loop)
        await #expect(throws: OriginError.busy) { try await slots.acquire("http://a", timerOn: Self.loop) }
        #expect(slots.statistics == OriginConnectionSlots.Statistics(waits: 1, timeouts: 1, waiting: 0))
        #expect(OriginError.busy.httpStatus == 503 && OriginError.busy.code == "busy")
        // The slot itself was never lost: released, it is free.
        slots.release("http://a")
        try await slots.acquire("http://a", timerOn: Self.loop)
    }
}
