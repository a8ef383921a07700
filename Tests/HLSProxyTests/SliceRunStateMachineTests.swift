import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSProxy

/// The decisions of one origin request for a run of slices, without an origin, a disk or a channel.
@Suite struct SliceRunStateMachineTests {
    typealias Machine = SliceRunStateMachine
    static let layout = SliceLayout(sliceSize: 100)

    static func head(_ status: Int, contentRange: String?) throws -> OriginResponseHead {
        var headers = HTTPHeaders()
        if let contentRange { headers.add(name: "Content-Range", value: contentRange) }
        return OriginResponseHead(status: status, headers: headers, url: try OriginURL("http://origin.test/big.mp4"))
    }

    static func bytes(_ count: Int, from first: Int = 0) -> ByteBuffer {
        ByteBuffer(bytes: (0..<count).map { UInt8(truncatingIfNeeded: first + $0) })
    }

    /// The pieces as (slice, first offset, byte count, starts, ends).
    static func shape(_ result: Result<[Machine.Piece], OriginError>) throws -> [[Int64]] {
        try result.get().map { [$0.slice, $0.offset, Int64($0.bytes.readableBytes), $0.startsSlice ? 1 : 0, $0.endsSlice ? 1 : 0] }
    }

    @Test func aRunAsksForItsSlicesAndASuffixRunForASliceMoreThanTheSuffix() {
        #expect(Machine(layout: Self.layout, indices: 2...4, suffix: nil).rangeHeader == "bytes=200-499")
        #expect(Machine(layout: Self.layout, indices: 0...0, suffix: nil).rangeHeader == "bytes=0-99")
        #expect(Machine(layout: Self.layout, indices: nil, suffix: 50).rangeHeader == "bytes=-149")
    }

    @Test func theBodyIsCutAtSliceBoundaries() throws {
        var machine = Machine(layout: Self.layout, indices: 2...4, suffix: nil)
        #expect(machine.answered(try Self.head(206, contentRange: "bytes 200-499/1000")) == 200)
        machine.accepted(objectSize: 1000, contentRange: "bytes 200-499/1000")
        #expect(try Self.shape(machine.received(Self.bytes(150))) == [[2, 200, 100, 1, 1], [3, 300, 50, 1, 0]])
        #expect(try Self.shape(machine.received(Self.bytes(30))) == [[3, 350, 30, 0, 0]])
        #expect(try Self.shape(machine.received(Self.bytes(120))) == [[3, 380, 20, 0, 1], [4, 400, 100, 1, 1]])
        let pieces = try machine.received(ByteBuffer()).get()
        #expect(pieces.isEmpty)
        #expect(throws: Never.self) { try machine.finished(.success(())).get() }
    }

    @Test func thePiecesCarryTheBytesInOrder() throws {
        var machine = Machine(layout: Self.layout, indices: 0...1, suffix: nil)
        _ = machine.answered(try Self.head(206, contentRange: "bytes 0-199/1000"))
        machine.accepted(objectSize: 1000, contentRange: "bytes 0-199/1000")
        let pieces = try machine.received(Self.bytes(200)).get()
        #expect(pieces.map(\.bytes) == [Self.bytes(100), Self.bytes(100, from: 100)])
    }

    @Test func theLastSliceOfAnObjectIsShorter() throws {
        var machine = Machine(layout: Self.layout, indices: 8...9, suffix: nil)
        _ = machine.answered(try Self.head(206, contentRange: "bytes 800-949/950"))
        machine.accepted(objectSize: 950, contentRange: "bytes 800-949/950")
        #expect(try Self.shape(machine.received(Self.bytes(150))) == [[8, 800, 100, 1, 1], [9, 900, 50, 1, 1]])
        #expect(throws: Never.self) { try machine.finished(.success(())).get() }
    }

    @Test func aSuffixRunStartsWhereTheOriginsAnswerDoes() throws {
        var machine = Machine(layout: Self.layout, indices: nil, suffix: 50)
        #expect(machine.answered(try Self.head(206, contentRange: "bytes 851-999/1000")) == 851)
        machine.accepted(objectSize: 1000, contentRange: "bytes 851-999/1000")
        // Slice 8 is entered past its start: that part is delivered, not stored (no piece starts the slice).
        #expect(try Self.shape(machine.received(Self.bytes(149))) == [[8, 851, 49, 0, 1], [9, 900, 100, 1, 1]])

        var ignored = Machine(layout: Self.layout, indices: nil, suffix: 50)
        #expect(ignored.answered(try Self.head(200, contentRange: nil)) == -1, "a whole answer has no first byte to start from")
        var unusable = Machine(layout: Self.layout, indices: nil, suffix: 50)
        #expect(unusable.answered(try Self.head(206, contentRange: "bytes */1000")) == -1)
    }

    @Test func moreBytesThanAnnouncedOrFewerAreTruncated() throws {
        var long = Machine(layout: Self.layout, indices: 0...0, suffix: nil)
        _ = long.answered(try Self.head(206, contentRange: "bytes 0-99/1000"))
        long.accepted(objectSize: 1000, contentRange: "bytes 0-99/1000")
        _ = try long.received(Self.bytes(60)).get()
        #expect(throws: OriginError.truncated) { try long.received(Self.bytes(41)).get() }

        var short = Machine(layout: Self.layout, indices: 0...0, suffix: nil)
        _ = short.answered(try Self.head(206, contentRange: "bytes 0-99/1000"))
        short.accepted(objectSize: 1000, contentRange: "bytes 0-99/1000")
        _ = try short.received(Self.bytes(99)).get()
        #expect(throws: OriginError.truncated) { try short.finished(.success(())).get() }
    }

    @Test func aStoppedRunReadsNothingMoreAndEndsCancelled() throws {
        var machine = Machine(layout: Self.layout, indices: 0...1, suffix: nil)
        #expect(throws: OriginError.cancelled) { try machine.received(Self.bytes(10)).get() }
        _ = machine.answered(try Self.head(206, contentRange: "bytes 0-199/1000"))
        machine.accepted(objectSize: 1000, contentRange: "bytes 0-199/1000")
        _ = try machine.received(Self.bytes(10)).get()
        machine.stop()
        #expect(machine.isStopped)
        #expect(throws: OriginError.cancelled) { try machine.received(Self.bytes(10)).get() }
        #expect(throws: OriginError.cancelled) { try machine.finished(.success(())).get() }

        var failed = Machine(layout: Self.layout, indices: 0...1, suffix: nil)
        #expect(throws: OriginError.timeout) { try failed.finished(.failure(.timeout)).get() }
    }
}
