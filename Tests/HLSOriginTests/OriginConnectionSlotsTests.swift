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

    @Test func waitersAreServedInOrderAsSlotsComeFree() async throws {
        let slots = OriginConnectionSlots(limit: 1, waitLimit: .seconds(600))
        try await slots.acquire("http://a", on: Self.loop).future.get()
        try await slots.acquire("http://b", on: Self.loop).future.get()  // another host has slots of its own
        let order = NIOLockedValueBox<[Int]>([])
        var waiters: [OriginConnectionSlots.Request] = []
        for index in 0..<3 {
            let request = slots.acquire("http://a", on: Self.loop)
            request.future.whenSuccess { order.withLockedValue { $0.append(index) } }
            waiters.append(request)
            #expect(slots.statistics.waiting == index + 1)
        }
        for served in 1...3 {
            slots.release("http://a")
            try await waiters[served - 1].future.get()
            #expect(order.withLockedValue { $0 } == Array(0..<served))
        }
        #expect(slots.statistics == OriginConnectionSlots.Statistics(waits: 3, timeouts: 0, waiting: 0))
    }

    @Test func aCancelledWaiterLeavesTheLine() async throws {
        let slots = OriginConnectionSlots(limit: 1, waitLimit: .seconds(600))
        let held = slots.acquire("http://a", on: Self.loop)
        try await held.future.get()
        let cancelled = slots.acquire("http://a", on: Self.loop)
        let next = slots.acquire("http://a", on: Self.loop)
        #expect(slots.statistics.waiting == 2)
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.future.get() }
        #expect(slots.statistics.waiting == 1)
        // The slot goes to the one still waiting, not to the cancelled one.
        slots.release("http://a")
        try await next.future.get()
        #expect(slots.statistics.waiting == 0)
        // Cancelling a request that has its slot changes nothing: the slot is still its to release.
        next.cancel()
        held.cancel()
        let third = slots.acquire("http://a", on: Self.loop)
        #expect(slots.statistics.waiting == 1, "the slot is still taken")
        slots.release("http://a")
        try await third.future.get()
    }

    @Test func aWaiterGivesUpAfterTheWaitLimitWithBusy() async throws {
        let slots = OriginConnectionSlots(limit: 1, waitLimit: .milliseconds(50))
        try await slots.acquire("http://a", on: Self.loop).future.get()
        await #expect(throws: OriginError.busy) { try await slots.acquire("http://a", on: Self.loop).future.get() }
        #expect(slots.statistics == OriginConnectionSlots.Statistics(waits: 1, timeouts: 1, waiting: 0))
        #expect(OriginError.busy.httpStatus == 503 && OriginError.busy.code == "busy")
        // The slot itself was never lost: released, it is free.
        slots.release("http://a")
        try await slots.acquire("http://a", on: Self.loop).future.get()
    }
}
