import NIOCore
import Testing

@testable import HLSProxy

/// The connection timeouts' rules with an injected clock: each test moves time by hand and asks the check.
@Suite struct ConnectionTimeoutsTests {
    static let limits = ConnectionTimeouts.Limits(head: .seconds(10), body: .seconds(5), send: .seconds(60), idle: .seconds(30))
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    static func at(_ seconds: Double) -> NIODeadline { start + .nanoseconds(Int64(seconds * 1e9)) }

    /// Checks at `seconds` with `buffered` bytes still in the channel.
    static func check(_ timeouts: inout ConnectionTimeouts, at seconds: Double, buffered: Int = 0) -> ConnectionTimeouts.Expired? {
        timeouts.check(at: at(seconds)) { buffered }
    }

    static func unexpectedClockRead() -> NIODeadline {
        Issue.record("the clock was read while answering")
        return at(2)
    }

    @Test func checksEveryQuarterOfTheShortestTimeout() {
        #expect(ConnectionTimeouts(limits: Self.limits, now: Self.start).checkInterval == .milliseconds(1250))
        let tiny = ConnectionTimeouts.Limits(head: .milliseconds(2), body: .seconds(1), send: .seconds(1), idle: .seconds(1))
        #expect(ConnectionTimeouts(limits: tiny, now: Self.start).checkInterval == .milliseconds(1), "never below 1 ms")
    }

    @Test func anIdleConnectionIsClosedAfterTheIdleTimeout() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        #expect(Self.check(&timeouts, at: 29.9) == nil)
        #expect(Self.check(&timeouts, at: 30) == .idle)
    }

    @Test func theIdleClockStartsAgainWhenAResponseCompletes() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(1))
        timeouts.requestHeadReceived(awaitingBody: false)
        timeouts.responseCompleted(at: Self.at(20))
        #expect(Self.check(&timeouts, at: 49) == nil)
        #expect(Self.check(&timeouts, at: 50) == .idle)
    }

    @Test func aHeadMustArriveWithinTheHeadTimeoutOfItsFirstByte() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(25))
        // Reading a head: the idle timeout no longer applies, the head timeout does.
        #expect(Self.check(&timeouts, at: 34.9) == nil)
        // More bytes of the same head do not restart the clock (a slowloris sends one byte at a time).
        timeouts.bytesRead(at: Self.at(34))
        #expect(Self.check(&timeouts, at: 35) == .head)
    }

    @Test func aRequestBeingAnsweredNeverTimesOutForItsHeadOrIdleness() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(1))
        timeouts.requestHeadReceived(awaitingBody: false)
        // A pipelined request's bytes while answering: no clock is read, nothing starts.
        timeouts.bytesRead(at: Self.unexpectedClockRead())
        #expect(Self.check(&timeouts, at: 10_000) == nil)
    }

    @Test func aBodyMayPauseNoLongerThanTheBodyTimeoutFromTheFirstCheck() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(1))
        timeouts.requestHeadReceived(awaitingBody: true)
        // No body byte yet: the first check starts the clock.
        #expect(Self.check(&timeouts, at: 100) == nil)
        #expect(Self.check(&timeouts, at: 104.9) == nil)
        // A body byte restarts it.
        timeouts.bytesRead(at: Self.at(104))
        #expect(Self.check(&timeouts, at: 108.9) == nil)
        #expect(Self.check(&timeouts, at: 109) == .body)
    }

    @Test func aCompleteBodyEndsTheBodyTimeout() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(1))
        timeouts.requestHeadReceived(awaitingBody: true)
        #expect(Self.check(&timeouts, at: 2) == nil)
        timeouts.requestReceived()
        #expect(Self.check(&timeouts, at: 1000) == nil)
    }

    @Test func aClientThatStopsReadingIsClosedAfterTheSendTimeout() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(0))
        timeouts.requestHeadReceived(awaitingBody: false)
        timeouts.queued(bytes: 10_000_000)
        // 1 MB taken, then nothing more.
        #expect(Self.check(&timeouts, at: 1, buffered: 9_000_000) == nil)
        #expect(Self.check(&timeouts, at: 60.9, buffered: 9_000_000) == nil)
        #expect(Self.check(&timeouts, at: 61, buffered: 9_000_000) == .send)
    }

    @Test func aSlowClientThatKeepsReadingIsNeverCutOff() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(0))
        timeouts.requestHeadReceived(awaitingBody: false)
        timeouts.queued(bytes: 10_000_000)
        // A thousand bytes a minute, checked every 50 s: ten hours, never closed.
        var buffered = 10_000_000
        for step in 1...720 {
            buffered -= 1000
            #expect(Self.check(&timeouts, at: Double(step) * 50, buffered: buffered) == nil)
        }
    }

    @Test func theChannelIsAskedOnlyWhileBytesMayWait() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(0))
        timeouts.requestHeadReceived(awaitingBody: false)
        var asked = 0
        let first = timeouts.check(at: Self.at(1)) {
            asked += 1
            return 0
        }
        #expect(first == nil)
        #expect(asked == 0, "nothing was queued")
        timeouts.queued(bytes: 100)
        let second = timeouts.check(at: Self.at(2)) {
            asked += 1
            return 0
        }
        #expect(second == nil)
        #expect(asked == 1)
        // Everything was sent at the last check: nothing can be waiting.
        let third = timeouts.check(at: Self.at(3)) {
            asked += 1
            return 0
        }
        #expect(third == nil)
        #expect(asked == 1)
    }

    @Test func sendingAgainAfterAStallStartsTheSendClockAgain() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(0))
        timeouts.requestHeadReceived(awaitingBody: false)
        timeouts.queued(bytes: 1000)
        #expect(Self.check(&timeouts, at: 1, buffered: 1000) == nil)
        #expect(Self.check(&timeouts, at: 59, buffered: 1000) == nil)
        // The client took some bytes just before the limit.
        #expect(Self.check(&timeouts, at: 60, buffered: 500) == nil)
        #expect(Self.check(&timeouts, at: 119, buffered: 500) == nil)
        #expect(Self.check(&timeouts, at: 120, buffered: 500) == .send)
    }

    @Test func aClosedConnectionNeverExpires() {
        var timeouts = ConnectionTimeouts(limits: Self.limits, now: Self.start)
        timeouts.bytesRead(at: Self.at(0))
        timeouts.closed()
        #expect(Self.check(&timeouts, at: 1_000_000) == nil)
    }
}
