import HLSCacheCore
import HLSTestSupport
import NIOCore
import Testing

@testable import HLSProxy

/// ``FetchSubscriptionStateMachine`` without a channel: what one client of a shared download is sent, and when.
@Suite struct FetchSubscriptionStateMachineTests {
    typealias Machine = FetchSubscriptionStateMachine
    typealias View = SharedFetchStateMachine.View

    static func head(length: Int64? = 100, playlist: Bool = false) throws -> FetchHead {
        FetchHead(
            contentLength: length, contentType: playlist ? MediaTypes.playlist : "video/mp2t", isPlaylist: playlist, etag: nil,
            lastModified: nil,
            url: try OriginURL("http://origin.test/v/seg1.ts"))
    }

    static func machine(range: (Int64, Int64)? = nil, headOnly: Bool = false, keySized: Bool = true, fallback: Bool = false) -> Machine {
        Machine(range: range.map { (first: $0.0, last: $0.1) }, headOnly: headOnly, mayReceiveKeySized: keySized, hasFallback: fallback)
    }

    static func chunk(_ count: Int) -> ByteBuffer { ByteBuffer(bytes: [UInt8](repeating: 1, count: count)) }

    @Test func theHeadGoesWithTheFirstBytesAndTheEndWithTheLast() throws {
        var machine = Self.machine()
        let nothing = machine.pump(View())
        guard case .wait = nothing else { Issue.record("\(nothing)"); return }
        let first = machine.pump(View(head: try Self.head(), received: 60, chunks: [Self.chunk(60)]))
        guard case .send(let head, .chunks(let chunks), let end) = first else { Issue.record("\(first)"); return }
        #expect(head != nil && chunks.count == 1 && !end)
        // A second pump while the write is in flight does nothing.
        guard case .wait = machine.pump(View(head: try Self.head(), received: 60)) else { Issue.record("writing"); return }
        #expect(machine.writeCompleted(success: true) == 60)
        #expect(machine.position == 60)
        let last = machine.pump(View(head: try Self.head(), ended: true, received: 100, chunks: [Self.chunk(40)]))
        guard case .send(nil, .chunks, true) = last else { Issue.record("\(last)"); return }
        #expect(machine.isDone)
    }

    @Test func aFailureIsTheFallbacksOrAnErrorBeforeTheHeadAndACutAfter() throws {
        var withFallback = Self.machine(fallback: true)
        guard case .fallback = withFallback.pump(View(failure: ProxyError.unavailable("x"))) else { Issue.record("fallback"); return }
        var plain = Self.machine()
        guard case .sendError = plain.pump(View(failure: ProxyError.unavailable("x"))) else { Issue.record("error"); return }
        var started = Self.machine()
        _ = started.pump(View(head: try Self.head(), received: 10, chunks: [Self.chunk(10)]))
        _ = started.writeCompleted(success: true)
        guard case .abort = started.pump(View(failure: ProxyError.unavailable("x"))) else { Issue.record("abort"); return }
        #expect(started.isDone)
    }

    @Test func aPlaylistIsMarkedThenAnsweredWhole() throws {
        var machine = Self.machine()
        guard case .markPlaylist = machine.pump(View(head: try Self.head(playlist: true))) else { Issue.record("mark"); return }
        guard case .wait = machine.pump(View(head: try Self.head(playlist: true))) else { Issue.record("marked once"); return }
        let playlist = RewrittenPlaylist(body: ByteBuffer(string: "#EXTM3U\n"), isLive: false, ttl: 0)
        guard case .respondPlaylist = machine.pump(View(head: try Self.head(playlist: true), playlist: playlist)) else {
            Issue.record("answer"); return
        }
        #expect(machine.isDone)
    }

    @Test func aKeySizedBodyIsRefusedOrHeldUntilItCannotBeOne() throws {
        var known = Self.machine(keySized: false)
        guard case .refuseKeySized = known.pump(View(head: try Self.head(length: 16))) else { Issue.record("known"); return }
        var unknown = Self.machine(keySized: false)
        guard case .wait = unknown.pump(View(head: try Self.head(length: nil), received: 16, chunks: [Self.chunk(16)])) else {
            Issue.record("held")
            return
        }
        // 17 bytes could still become an AES-256 key (32): held until more than 32 have come.
        guard case .wait = unknown.pump(View(head: try Self.head(length: nil), received: 32, chunks: [Self.chunk(32)])) else {
            Issue.record("held to 32")
            return
        }
        guard
            case .send(.some, .chunks, false) = unknown.pump(View(head: try Self.head(length: nil), received: 33, chunks: [Self.chunk(33)]))
        else {
            Issue.record("released")
            return
        }
        var aes256 = Self.machine(keySized: false)
        guard case .refuseKeySized = aes256.pump(View(head: try Self.head(length: 32))) else { Issue.record("known 32"); return }
        var endedAt32 = Self.machine(keySized: false)
        guard
            case .refuseKeySized = endedAt32.pump(
                View(head: try Self.head(length: nil), ended: true, received: 32, chunks: [Self.chunk(32)]))
        else {
            Issue.record("ended at 32")
            return
        }
    }

    @Test func aRangeStartsAtItsFirstByteAndEndsAtItsLast() throws {
        var machine = Self.machine(range: (50, 59))
        #expect(machine.position == 50)
        let action = machine.pump(View(head: try Self.head(), received: 80, chunks: [Self.chunk(30)]))
        guard case .send(.some, .chunks(let chunks), true) = action else { Issue.record("\(action)"); return }
        #expect(chunks.map(\.readableBytes) == [10])
    }

    @Test func aClientBehindTheWindowIsSentTheFileInBoundedSpans() throws {
        var machine = Self.machine()
        let action = machine.pump(View(head: try Self.head(length: 100 << 20), received: 40 << 20, fileEnd: 30 << 20))
        guard case .send(.some, .file(let offset, let length), false) = action else { Issue.record("\(action)"); return }
        #expect(offset == 0 && length == Machine.maxFileWrite)
        #expect(machine.writeCompleted(success: true) == Machine.maxFileWrite)
    }

    @Test func aHeadRequestGetsTheHeadAndEnds() throws {
        var machine = Self.machine(headOnly: true)
        guard case .send(.some, .none, true) = machine.pump(View(head: try Self.head())) else { Issue.record("head"); return }
        #expect(machine.isDone)
    }

    @Test func aFailedWriteEndsTheClient() throws {
        var machine = Self.machine()
        _ = machine.pump(View(head: try Self.head(), received: 10, chunks: [Self.chunk(10)]))
        #expect(machine.writeCompleted(success: false) == nil)
        #expect(machine.isDone)
    }
}
