import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSProxy

/// The decisions of one request answered from slices, without a channel, a disk or an origin: the events a
/// ``SliceStitcher`` reports, and the ordered effects it runs.
@Suite struct SliceStitcherStateMachineTests {
    typealias Machine = SliceStitcherStateMachine
    typealias Effect = Machine.Effect
    /// Slices of 100 bytes: an object of more than 800 is sliced.
    static let layout = SliceLayout(sliceSize: 100)

    static func machine(range: String? = nil, isHead: Bool = false, canRelay: Bool = true) -> Machine {
        Machine(layout: layout, request: Machine.Request(isHead: isHead, range: range), pathExtension: "mp4", canRelay: canRelay)
    }

    static func set(size: Int64 = 1000, present: Set<Int64> = [], validator: String = "\"v1\"") -> SliceSet {
        SliceSet(validator: validator, objectSize: size, contentType: "video/mp4", lastModified: nil, present: present)
    }

    static func head(_ status: Int = 206, contentRange: String?, etag: String? = "\"v1\"", type: String = "video/mp4") throws
        -> OriginResponseHead
    {
        var headers = HTTPHeaders()
        if let contentRange { headers.add(name: "Content-Range", value: contentRange) }
        if let etag { headers.add(name: "ETag", value: etag) }
        headers.add(name: "Content-Type", value: type)
        return OriginResponseHead(status: status, headers: headers, url: try OriginURL("http://origin.test/big.mp4"))
    }

    static func bytes(_ count: Int, from first: Int = 0) -> ByteBuffer {
        ByteBuffer(bytes: (0..<count).map { UInt8(truncatingIfNeeded: first + $0) })
    }

    /// The kinds of `effects`, in order, with a begun stream's status and cache result and a write's byte count.
    static func names(_ effects: [Effect]) -> [String] {
        effects.map { effect in
            switch effect {
            case .beginStream(let status, _, let result): "head \(status.code) \(result)"
            case .write(let bytes): "write \(bytes.readableBytes)"
            case .end: "end"
            case .abort: "abort"
            case .sendError(let error, _): "error \(error.httpStatus)"
            case .sendOriginError: "origin error"
            case .countOriginFailure: "count"
            case .notModified: "304"
            case .fallback: "fallback"
            case .cancelRun: "cancel run"
            case .releaseRun: "release run"
            case .forgetRun: "forget run"
            case .dropStoredSlices: "drop slices"
            case .logVersionChanged: "log version"
            case .startRelayFill: "relay fill"
            case .pump: "pump"
            }
        }
    }

    static func headers(of effects: [Effect]) -> HTTPHeaders? {
        for case .beginStream(_, let headers, _) in effects { return headers }
        return nil
    }

    // MARK: - Starting

    @Test func withNothingStoredARangeStartsARunFromItsFirstSliceUpToEightSlices() {
        #expect(Self.machine(range: "bytes=250-").start() == .run(index: 2, more: []))
        #expect(Self.machine(range: "bytes=250-420").start() == .run(index: 2, more: [3, 4]))
        #expect(Self.machine(range: "bytes=0-99999").start() == .run(index: 0, more: Array(1...7)))
        #expect(Self.machine(range: "bytes=-50").start() == .suffixRun(50))
        #expect(Self.machine(range: nil).start() == .fallback)
        #expect(Self.machine(range: "bytes=0-1,5-6").start() == .fallback)
    }

    @Test func aStoredVersionIsServedSliceBySliceThenEnds() {
        var machine = Self.machine(range: "bytes=150-349")
        let (adopted, proceed) = machine.adopt(Self.set(present: [1, 2, 3]))
        #expect(adopted.isEmpty && proceed)
        #expect(machine.next() == .stored(index: 1))
        let first = machine.sendingStored(1)
        #expect(Self.names(first.effects) == ["head 206 hit"])
        #expect(Self.headers(of: first.effects)?.first(name: "Content-Range") == "bytes 150-349/1000")
        #expect(Self.headers(of: first.effects)?.first(name: "X-Cache") == "HIT")
        #expect(first.offset == 50 && first.length == 50)
        machine.sent(through: 199)
        #expect(machine.next() == .stored(index: 2))
        let second = machine.sendingStored(2)
        #expect(second.effects.isEmpty, "the head goes out once")
        #expect(second.offset == 0 && second.length == 100)
        machine.sent(through: 299)
        #expect(machine.next() == .stored(index: 3))
        let last = machine.sendingStored(3)
        #expect(last.offset == 0 && last.length == 50, "the last slice is cut at the client's last byte")
        machine.sent(through: 349)
        guard case .finished(let effects) = machine.next() else {
            Issue.record("the response should end")
            return
        }
        #expect(Self.names(effects) == ["end"])
        #expect(machine.isComplete)
        #expect(machine.next() == .wait)
    }

    @Test func aMissingSliceIsFetchedWithTheMissingOnesAfterIt() {
        var machine = Self.machine(range: "bytes=0-")
        _ = machine.adopt(Self.set(present: [0, 4]))
        #expect(machine.next() == .stored(index: 0))
        _ = machine.sendingStored(0)
        machine.sent(through: 99)
        #expect(machine.next() == .fetch(index: 1, more: [2, 3]), "a run stops before a stored slice")
        machine.runStarted()
        #expect(machine.next() == .wait, "one run at a time")
    }

    @Test func aStoredSliceGoneSinceTheSetWasReadIsFetched() {
        var machine = Self.machine(range: "bytes=0-")
        _ = machine.adopt(Self.set(present: [0, 1]))
        #expect(machine.next() == .stored(index: 0))
        machine.storedSliceGone(0)
        #expect(machine.next() == .fetch(index: 0, more: []), "slice 1 is still stored: the run is slice 0 alone")
    }

    // MARK: - The client's preconditions and range against the version

    @Test func preconditionsAndUnsatisfiableRangesAnswerWithoutSending() {
        var unmodified = Machine(
            layout: Self.layout, request: Machine.Request(ifNoneMatch: "\"v1\""), pathExtension: "mp4", canRelay: false)
        let (notModified, more) = unmodified.adopt(Self.set())
        #expect(Self.names(notModified) == ["304"] && !more)

        var failing = Machine(layout: Self.layout, request: Machine.Request(ifMatch: "\"v0\""), pathExtension: "mp4", canRelay: false)
        #expect(Self.names(failing.adopt(Self.set()).effects) == ["error 412"])

        var beyond = Self.machine(range: "bytes=5000-")
        let (unsatisfiable, _) = beyond.adopt(Self.set())
        #expect(Self.names(unsatisfiable) == ["error 416"])
        guard case .sendError(_, let headers) = unsatisfiable.first else { return }
        #expect(headers.first(name: "Content-Range") == "bytes */1000")
        #expect(beyond.next() == .wait)
    }

    @Test func aHeadRequestSendsTheHeadAndEnds() {
        var machine = Self.machine(range: "bytes=0-99", isHead: true)
        let (effects, more) = machine.adopt(Self.set(present: Set(0...9)))
        #expect(Self.names(effects) == ["head 200 hit", "end"], "HEAD ignores Range")
        #expect(Self.headers(of: effects)?.first(name: "Content-Length") == "1000")
        #expect(!more)
    }

    // MARK: - This request's runs

    /// A machine whose first run (slices 2…3 for `bytes=250-349`) was answered and accepted.
    static func streaming() throws -> Machine {
        var machine = Self.machine(range: "bytes=250-349")
        machine.runStarted()
        let (effects, accepted) = machine.runAnswered(
            try Self.head(contentRange: "bytes 200-399/1000"), firstByte: 200, host: "origin.test")
        #expect(Self.names(effects) == ["head 206 miss"])
        #expect(accepted?.set.objectSize == 1000 && accepted?.store == true)
        return machine
    }

    @Test func aRunsBytesBeforeTheClientsRangeAreNotSentThenTheRangeInOrderThenTheEnd() throws {
        var machine = try Self.streaming()
        #expect(machine.runDelivered(Self.bytes(40, from: 200), at: 200).isEmpty, "bytes before the range are only stored")
        #expect(Self.names(machine.runDelivered(Self.bytes(40, from: 240), at: 240)) == ["write 30"])
        #expect(machine.position == 280)
        #expect(Self.names(machine.runDelivered(Self.bytes(100, from: 280), at: 280)) == ["write 70", "end"], "the last byte ends it")
        #expect(machine.isComplete)
        #expect(machine.runDelivered(Self.bytes(20, from: 380), at: 380).isEmpty, "bytes after the range are only stored")
        #expect(machine.runFinished(.success(())).isEmpty)
    }

    @Test func aSliceArrivingEarlyIsStoredAndTheNextRunStartsAfterIt() throws {
        var machine = Self.machine(range: "bytes=0-")
        _ = machine.adopt(Self.set(present: [0]))
        _ = machine.sendingStored(0)
        machine.sent(through: 99)
        #expect(machine.next() == .fetch(index: 1, more: Array(2...8)))
        machine.runStarted()
        let (_, accepted) = machine.runAnswered(try Self.head(contentRange: "bytes 100-199/1000"), firstByte: 100, host: "origin.test")
        #expect(accepted != nil)
        #expect(Self.names(machine.runDelivered(Self.bytes(100, from: 100), at: 100)) == ["write 100"])
        machine.runStored(1)
        // Another request stored slice 3 meanwhile (it came early); the run ends after slice 1.
        machine.runStored(3)
        #expect(Self.names(machine.runFinished(.success(()))) == ["pump"])
        #expect(machine.next() == .fetch(index: 2, more: []), "slice 3 is stored: not fetched again")
    }

    @Test func theClientGoingAwayCancelsTheRunInFlight() throws {
        var machine = try Self.streaming()
        #expect(Self.names(machine.clientGone()) == ["cancel run"])
        #expect(machine.isComplete)
        #expect(machine.runDelivered(Self.bytes(100, from: 200), at: 200).isEmpty)
        #expect(machine.runFinished(.failure(.cancelled)).isEmpty, "a cancelled run is not counted as the origin's failure")

        var idle = Self.machine(range: "bytes=0-")
        _ = idle.adopt(Self.set(present: [0]))
        #expect(idle.clientGone().isEmpty, "no run to cancel")
        #expect(idle.next() == .wait)
    }

    @Test func anOriginErrorMidSliceAbortsAndBeforeTheHeadIsAnswered() throws {
        var machine = try Self.streaming()
        _ = machine.runDelivered(Self.bytes(80, from: 200), at: 200)
        let effects = machine.runFinished(.failure(.truncated))
        #expect(Self.names(effects) == ["count", "abort"])
        #expect(effects.first == .countOriginFailure(OriginError.truncated.code))

        var early = Self.machine(range: "bytes=0-")
        _ = early.adopt(Self.set())
        #expect(early.next() == .fetch(index: 0, more: Array(1...7)))
        early.runStarted()
        #expect(Self.names(early.runFinished(.failure(.truncated))) == ["count", "origin error"], "nothing sent: answered")
    }

    @Test func aWriteFailureAbortsOnce() {
        var machine = Self.machine(range: "bytes=0-")
        _ = machine.adopt(Self.set(present: [0, 1]))
        _ = machine.sendingStored(0)
        #expect(machine.writeFailed() == [.abort])
        #expect(machine.writeFailed().isEmpty)
        #expect(machine.next() == .wait)
    }

    @Test func anOriginIgnoringRangeFallsBackOrAnswersItsError() throws {
        var ignoring = Self.machine(range: "bytes=250-")
        ignoring.runStarted()
        let (fallback, none) = ignoring.runAnswered(try Self.head(200, contentRange: nil), firstByte: 200, host: "origin.test")
        #expect(Self.names(fallback) == ["forget run", "fallback"] && none == nil)

        var stored = Self.machine(range: "bytes=0-")
        _ = stored.adopt(Self.set(present: [0]))
        _ = stored.next()
        stored.storedSliceGone(0)
        stored.runStarted()
        let (failed, _) = stored.runAnswered(try Self.head(503, contentRange: nil), firstByte: 0, host: "origin.test")
        #expect(Self.names(failed) == ["forget run", "error 503"], "a known version: the origin's error is answered")
    }

    @Test func anotherVersionBeforeTheHeadIsServedInsteadAndAfterItAborts() throws {
        var before = Self.machine(range: "bytes=0-")
        _ = before.adopt(Self.set(size: 2000, present: [5]))
        #expect(before.next() == .fetch(index: 0, more: Array(1...4)))
        before.runStarted()
        let (effects, accepted) = before.runAnswered(
            try Self.head(contentRange: "bytes 0-99/1000", etag: "\"v2\""), firstByte: 0, host: "h")
        #expect(Self.names(effects) == ["log version", "drop slices", "head 206 miss"])
        #expect(accepted?.set.validator == "\"v2\"" && accepted?.set.objectSize == 1000)
        #expect(Self.headers(of: effects)?.first(name: "Content-Length") == "1000")

        var later = Self.machine(range: "bytes=0-")
        _ = later.adopt(Self.set(present: [0]))
        _ = later.sendingStored(0)
        later.sent(through: 99)
        _ = later.next()
        later.runStarted()
        let (aborted, none) = later.runAnswered(
            try Self.head(contentRange: "bytes 100-199/1000", etag: "\"v2\""), firstByte: 100, host: "h")
        #expect(Self.names(aborted) == ["log version", "drop slices", "abort"] && none == nil)
        #expect(later.isComplete)
    }

    @Test func aSmallObjectIsRelayedWithItsBackgroundFillOrServedWithoutSlices() throws {
        var relayed = Self.machine(range: "bytes=100-")
        relayed.runStarted()
        let (effects, accepted) = relayed.runAnswered(try Self.head(contentRange: "bytes 100-499/500"), firstByte: 100, host: "h")
        #expect(Self.names(effects) == ["relay fill", "head 206 passthrough"])
        #expect(accepted?.store == false, "relayed, not stored as slices")

        var withoutFill = Self.machine(range: "bytes=100-", canRelay: false)
        withoutFill.runStarted()
        let (fallback, _) = withoutFill.runAnswered(try Self.head(contentRange: "bytes 100-499/500"), firstByte: 100, host: "h")
        #expect(Self.names(fallback) == ["forget run", "fallback"])

        var playlist = Self.machine(range: "bytes=0-")
        playlist.runStarted()
        let (checked, _) = playlist.runAnswered(
            try Self.head(contentRange: "bytes 0-99/500", type: "application/vnd.apple.mpegurl"), firstByte: 0, host: "h")
        #expect(Self.names(checked) == ["forget run", "fallback"], "a playlist takes the path that checks it")
    }

    @Test func aSuffixRunWhoseRangeMovedWithTheSizeStartsAgain() throws {
        // bytes=-50 of an object whose size the suffix run tells: the run answered from byte 851 of 1000, but the
        // client's first byte (950) is in it; a run answered from a byte after the client's first starts again.
        var fits = Self.machine(range: "bytes=-50")
        fits.runStarted()
        let (effects, accepted) = fits.runAnswered(try Self.head(contentRange: "bytes 851-999/1000"), firstByte: 851, host: "h")
        #expect(Self.names(effects) == ["head 206 miss"] && accepted != nil)

        var moved = Self.machine(range: "bytes=-500")
        moved.runStarted()
        let (restart, none) = moved.runAnswered(try Self.head(contentRange: "bytes 600-999/1000"), firstByte: 600, host: "h")
        #expect(Self.names(restart) == ["release run", "pump"] && none == nil)
        #expect(moved.next() == .fetch(index: 5, more: [6, 7, 8, 9]))
    }

    // MARK: - Following another request's run

    @Test func aFollowedSliceIsSentAsItIsWrittenThenTheNextSliceFollows() {
        var machine = Self.machine(range: "bytes=0-")
        #expect(machine.follow(Machine.FlightProgress(), index: 0) == .wait, "nothing announced yet")
        let announced = Machine.FlightProgress(set: Self.set(), hasFile: false)
        #expect(machine.follow(announced, index: 0) == .effects([.pump]), "the announced version is adopted")
        #expect(machine.set?.objectSize == 1000)
        #expect(machine.follow(announced, index: 0) == .wait, "no file yet")
        guard
            case .send(let effects, let offset, let length) = machine.follow(
                Machine.FlightProgress(set: Self.set(), hasFile: true, written: 60), index: 0)
        else {
            Issue.record("the written part should be sent")
            return
        }
        #expect(Self.names(effects) == ["head 206 miss"] && offset == 0 && length == 60)
        machine.sent(through: 59)
        #expect(machine.followsOn(0))
        #expect(machine.follow(Machine.FlightProgress(set: Self.set(), hasFile: true, written: 60), index: 0) == .wait)
        guard
            case .send(let more, let from, let rest) = machine.follow(
                Machine.FlightProgress(set: Self.set(), hasFile: true, written: 100), index: 0)
        else { return }
        #expect(more.isEmpty && from == 60 && rest == 40)
        machine.sent(through: 99)
        #expect(!machine.followsOn(0), "slice 0 is sent: the next one")
        #expect(machine.follow(Machine.FlightProgress(set: Self.set(), outcome: true), index: 0) == .effects([.pump]))
        #expect(machine.next() == .fetch(index: 1, more: Array(2...8)))
    }

    @Test func aFlightOfAnotherVersionIsNotFollowedAndOneOverWithNothingKnownLooksUpTheStore() {
        var machine = Self.machine(range: "bytes=0-")
        _ = machine.adopt(Self.set(present: [1]))
        let other = Machine.FlightProgress(set: Self.set(validator: "\"v9\""), hasFile: true, written: 100)
        #expect(machine.follow(other, index: 0) == .wait)
        #expect(machine.follow(Machine.FlightProgress(outcome: false), index: 0) == .effects([.pump]))
        #expect(machine.next() == .fetch(index: 0, more: []), "given up: this request fetches it")

        var fresh = Self.machine(range: "bytes=0-")
        #expect(fresh.follow(Machine.FlightProgress(outcome: true), index: 0) == .lookUpStoredSet)
        _ = fresh.clientGone()
        #expect(fresh.follow(Machine.FlightProgress(outcome: true), index: 0) == .stop)
    }

    @Test func rangeHeadersBeforeTheSizeIsKnown() {
        #expect(Machine.firstOffset(of: "bytes=100-199") == 100)
        #expect(Machine.lastOffset(of: "bytes=100-199") == 199)
        #expect(Machine.suffixLength(of: "bytes=-500") == 500)
        #expect(Machine.suffixLength(of: "bytes=100-") == nil)
    }
}
