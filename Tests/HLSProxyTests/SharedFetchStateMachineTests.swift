import HLSCacheCore
import HLSOrigin
import HLSTestSupport
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSProxy

/// ``SharedFetchStateMachine`` without a channel, an origin or a disk: each event's action.
@Suite struct SharedFetchStateMachineTests {
    typealias Machine = SharedFetchStateMachine

    static func machine(
        _ path: String = "/v/seg1.ts", window: Int64 = 100, maxObject: Int64 = 1 << 20, cacheable: Bool = true, unwatched: Bool = false
    ) throws -> Machine {
        Machine(
            limits: .init(window: window, maxPlaylistBytes: 1000, maxObjectBytes: maxObject),
            url: try OriginURL("http://origin.test\(path)"),
            cacheable: cacheable, unwatched: unwatched)
    }

    static func head(_ status: Int = 200, type: String? = "video/mp2t", length: Int? = nil, path: String = "/v/seg1.ts") throws
        -> OriginResponseHead
    {
        var headers = HTTPHeaders()
        if let type { headers.add(name: "Content-Type", value: type) }
        if let length { headers.add(name: "Content-Length", value: String(length)) }
        return OriginResponseHead(status: status, headers: headers, url: try OriginURL("http://origin.test\(path)"))
    }

    static func bytes(_ count: Int, _ value: UInt8 = 0x47) -> ByteBuffer {
        ByteBuffer(bytes: [UInt8](repeating: value, count: count))
    }

    /// A client, identified as the machine identifies them.
    final class Client {}

    @Test func mediaIsStreamedStoredAndCommitted() throws {
        var machine = try Self.machine()
        let begin = machine.headReceived(try Self.head(length: 30))
        #expect(begin.begun?.store == true)
        #expect(begin.begun?.head.contentType == "video/mp2t")
        #expect(begin.notifies)
        let opened = machine.fileOpened()
        #expect(opened.failure == nil)
        let body = machine.bodyReceived(Self.bytes(30))
        #expect(body.stored.count == 1)
        #expect(body.notifies)
        #expect(!body.pausesOrigin)
        let end = machine.originFinished(.success(()))
        #expect(end.committed != nil)
        #expect(!end.removes)
        #expect(!machine.isRunning)
    }

    /// The effects of an action, in order, by kind (with a chunk's and a memory change's byte count).
    static func names(_ action: Machine.Action) -> [String] {
        action.map { effect in
            switch effect {
            case .fail(_, let origin): origin ? "fail origin" : "fail"
            case .begin(_, let store): store ? "begin stored" : "begin"
            case .store(let chunk): "store \(chunk.readableBytes)"
            case .abandonFile: "abandon"
            case .commit: "commit"
            case .processPlaylist(_, let body): "playlist \(body.count)"
            case .notify: "notify"
            case .pauseOrigin: "pause"
            case .resumeOrigin: "resume"
            case .remove: "remove"
            case .releaseMemory(let count): "memory \(count)"
            }
        }
    }

    @Test func effectsComeInTheOrderTheyArise() throws {
        var machine = try Self.machine(window: 100)
        #expect(Self.names(machine.headReceived(try Self.head(length: 1000))) == ["begin stored", "notify"])
        #expect(machine.fileOpened().isEmpty)
        #expect(Self.names(machine.bodyReceived(Self.bytes(40))) == ["memory -40", "store 40", "notify"])
        _ = machine.bodyReceived(Self.bytes(40))
        #expect(Self.names(machine.bodyReceived(Self.bytes(40))) == ["memory -40", "store 40", "notify", "pause"])
        #expect(Self.names(machine.fileWritten(80)) == ["memory 80", "resume"], "memory goes before the origin resumes")
        _ = machine.bodyReceived(Self.bytes(40))
        #expect(Self.names(machine.bodyReceived(Self.bytes(40))).last == "pause")
        #expect(
            Self.names(machine.originFinished(.failure(.truncated))) == ["fail origin", "memory 120", "resume", "notify"],
            "a failure lets go of the window and wakes the paused origin and the clients last")

        var whole = try Self.machine()
        _ = whole.headReceived(try Self.head(length: 30))
        _ = whole.fileOpened()
        _ = whole.bodyReceived(Self.bytes(30))
        #expect(Self.names(whole.originFinished(.success(()))) == ["commit", "notify"])

        var sniffed = try Self.machine("/v/seg1.ts")
        #expect(sniffed.headReceived(try Self.head(type: "application/x-mpegURL", length: 20)).isEmpty)
        #expect(
            Self.names(sniffed.bodyReceived(Self.bytes(20)))
                == ["memory -20", "memory 20", "begin stored", "notify", "memory -20", "store 20", "notify"],
            "the held bytes are replayed after the head they belong to")
    }

    @Test func memoryHoldsAtMostTheWindowAndTheDiskPacesTheOrigin() throws {
        var machine = try Self.machine(window: 100)
        _ = machine.headReceived(try Self.head(length: 1000))
        _ = machine.fileOpened()
        var released: Int64 = 0
        for _ in 0..<2 {
            let action = machine.bodyReceived(Self.bytes(40))
            released += action.memoryReleased
            #expect(!action.pausesOrigin)
        }
        let third = machine.bodyReceived(Self.bytes(40))
        released += third.memoryReleased
        #expect(third.pausesOrigin, "120 bytes unwritten is past the 100-byte window")
        #expect(machine.heldBytes == 120)
        // The disk took the first two chunks: they leave memory and the origin goes on.
        let written = machine.fileWritten(80)
        released += written.memoryReleased
        #expect(written.resumesOrigin)
        #expect(written.memoryReleased == 80)
        #expect(machine.heldBytes == 40)
        #expect(released == -machine.heldBytes)
    }

    @Test func aLateJoinerReadsWhatIsOnDiskThenTheWindow() throws {
        var machine = try Self.machine(window: 100)
        _ = machine.headReceived(try Self.head(length: 1000))
        _ = machine.fileOpened()
        for _ in 0..<5 { _ = machine.bodyReceived(Self.bytes(40)) }
        _ = machine.fileWritten(160)
        let late = Client()
        let result1 = machine.subscribe(ObjectIdentifier(late), from: 0)
        #expect(result1)
        let behind = machine.view(from: 0)
        #expect(behind.fileEnd == 160)
        #expect(behind.chunks.isEmpty)
        let edge = machine.view(from: 170)
        #expect(edge.fileEnd == nil)
        #expect(edge.chunks.map(\.readableBytes) == [30])
        #expect(edge.received == 200)
        #expect(machine.progress.servableFrom == 0)
    }

    @Test func withoutACacheFileTheSlowestClientPacesAndNewcomersCannotStartOver() throws {
        var machine = try Self.machine(window: 100, cacheable: false)
        let fast = Client(), slow = Client()
        let result2 = machine.subscribe(ObjectIdentifier(fast), from: 0)
        #expect(result2)
        let result3 = machine.subscribe(ObjectIdentifier(slow), from: 0)
        #expect(result3)
        let begin = machine.headReceived(try Self.head(length: 1000))
        #expect(begin.begun?.store == false)
        for _ in 0..<2 { _ = machine.bodyReceived(Self.bytes(40)) }
        let result4 = machine.bodyReceived(Self.bytes(40))
        #expect(result4.pausesOrigin)
        let fastTook = machine.progress(ObjectIdentifier(fast), to: 120)
        #expect(fastTook.memoryReleased == 0)
        let slowTook = machine.progress(ObjectIdentifier(slow), to: 80)
        #expect(slowTook.memoryReleased == 80)
        #expect(slowTook.resumesOrigin)
        let result5 = machine.subscribe(ObjectIdentifier(Client()), from: 0)
        #expect(!result5, "bytes 0-79 are gone")
        let result6 = machine.subscribe(ObjectIdentifier(Client()), from: 80)
        #expect(result6)
    }

    /// A channel of an IPTV list that is one never-ending MPEG-TS body (no length): not stored, and a client asking
    /// for it whole once its start is gone joins at what memory still holds (up to the slowest client), at a 188-byte
    /// packet boundary — one
    /// origin connection for every player of it. A client of a body with a length, or of a Range, cannot.
    @Test func aNeverEndingChannelIsNotStoredAndNewcomersJoinLiveAtAPacketBoundary() throws {
        var machine = Machine(
            limits: .init(window: 1000, maxPlaylistBytes: 1000, maxObjectBytes: 1 << 20),
            url: try OriginURL("http://origin.test/live/1.ts"),
            cacheable: true, isChannel: true)
        let first = Client()
        let firstAt = machine.subscribe(ObjectIdentifier(first), from: 0, joiningLive: true)
        #expect(firstAt == 0)
        let begin = machine.headReceived(try Self.head(length: nil, path: "/live/1.ts"))
        #expect(begin.begun?.store == false, "a never-ending channel is never written to disk")
        for _ in 0..<10 { _ = machine.bodyReceived(Self.bytes(188 * 3)) }
        _ = machine.progress(ObjectIdentifier(first), to: 1000)
        let plainJoin = machine.subscribe(ObjectIdentifier(Client()), from: 0)
        #expect(!plainJoin, "a plain subscriber cannot start over")
        let joined = machine.subscribe(ObjectIdentifier(Client()), from: 0, joiningLive: true)
        // Memory holds the chunk [564, 1128) the slowest client (at 1000) is in: 564 is a packet boundary.
        #expect(joined == 564)
        #expect(machine.view(from: 564).chunks.first?.readableBytes == 564)
        // The body ended: nothing to join.
        _ = machine.originFinished(.success(()))
        let afterEnd = machine.subscribe(ObjectIdentifier(Client()), from: 0, joiningLive: true)
        #expect(afterEnd == nil)

        // The same body from a URL no list names as a channel is stored (up to cache.maxObjectSize).
        var plain = try Self.machine("/live/1.ts", window: 1000)
        let plainAt = plain.subscribe(ObjectIdentifier(Client()), from: 0, joiningLive: true)
        #expect(plainAt == 0)
        let plainBegin = plain.headReceived(try Self.head(length: nil, path: "/live/1.ts"))
        #expect(plainBegin.begun?.store == true)
        // A body with a length is never joined in the middle.
        var sized = try Self.machine(window: 100, cacheable: false)
        let reader = Client()
        let sizedAt = sized.subscribe(ObjectIdentifier(reader), from: 0)
        #expect(sizedAt)
        _ = sized.headReceived(try Self.head(length: 1000))
        for _ in 0..<3 { _ = sized.bodyReceived(Self.bytes(40)) }
        _ = sized.progress(ObjectIdentifier(reader), to: 120)
        let sizedJoin = sized.subscribe(ObjectIdentifier(Client()), from: 0, joiningLive: true)
        #expect(sizedJoin == nil)
    }

    @Test func aPlaylistIsCollectedWholeWhateverTheWindow() throws {
        var machine = try Self.machine("/v/index.m3u8", window: 10)
        let begin = machine.headReceived(try Self.head(type: "application/vnd.apple.mpegurl", path: "/v/index.m3u8"))
        #expect(begin.begun?.head.isPlaylist == true)
        #expect(begin.begun?.store == false)
        for _ in 0..<5 {
            let action = machine.bodyReceived(Self.bytes(50, 0x23))
            #expect(!action.pausesOrigin)
        }
        let end = machine.originFinished(.success(()))
        #expect(end.playlist?.body.count == 5)
        #expect(machine.heldBytes == 0)
        let ready = machine.playlistRewritten(RewrittenPlaylist(body: ByteBuffer(string: "#EXTM3U\n"), isLive: false, ttl: 0))
        #expect(ready.notifies && ready.removes)
        #expect(machine.view(from: 0).playlist != nil)
    }

    @Test func aPlaylistOverItsCapFails() throws {
        var machine = try Self.machine("/v/index.m3u8")
        _ = machine.headReceived(try Self.head(type: "application/vnd.apple.mpegurl", path: "/v/index.m3u8"))
        var failed: (any HTTPMappableError)?
        for _ in 0..<30 where failed == nil { failed = machine.bodyReceived(Self.bytes(50, 0x23)).failure }
        #expect(failed as? ProxyError == .corrupted)
        #expect(machine.heldBytes == 0)
    }

    @Test func aGenericTypeIsSniffedAsAPlaylist() throws {
        var machine = try Self.machine("/live/manifest")
        let result7 = machine.headReceived(try Self.head(type: "application/octet-stream", path: "/live/manifest"))
        #expect(result7.begun == nil)
        let result8 = machine.bodyReceived(ByteBuffer(string: "#EX"))
        #expect(result8.begun == nil)
        let decided = machine.bodyReceived(ByteBuffer(string: "TM3U\n#EXT-X-VERSION:3\n"))
        #expect(decided.begun?.head.isPlaylist == true)
        #expect(decided.stored.isEmpty)
    }

    @Test func mediaLabelledAPlaylistIsSniffedAndReplayedIntoTheFile() throws {
        var machine = try Self.machine("/v/seg1.ts")
        let result9 = machine.headReceived(try Self.head(type: "application/x-mpegURL", length: 20))
        #expect(result9.begun == nil)
        let decided = machine.bodyReceived(Self.bytes(20))
        #expect(decided.begun?.head.isPlaylist == false)
        #expect(decided.begun?.head.contentType == "video/mp2t")
        #expect(decided.begun?.store == true)
        #expect(decided.stored.map(\.readableBytes) == [20])
        #expect(decided.memoryReleased == -20)
    }

    @Test func anOriginErrorStatusFailsAndCounts() throws {
        var machine = try Self.machine()
        let action = machine.headReceived(try Self.head(404))
        #expect(action.failure as? ProxyError == .originStatus)
        #expect(action.failure?.httpStatus == 404)
        #expect(action.failureIsOrigin)
        #expect(machine.failure != nil)
        let result10 = machine.subscribe(ObjectIdentifier(Client()), from: 0)
        #expect(!result10)
    }

    @Test func theLastClientLeavingCancelsABodyOfUnknownLength() throws {
        var machine = try Self.machine()
        let client = Client()
        let result11 = machine.subscribe(ObjectIdentifier(client), from: 0)
        #expect(result11)
        _ = machine.headReceived(try Self.head(length: nil))
        _ = machine.bodyReceived(Self.bytes(40))
        let left = machine.unsubscribe(ObjectIdentifier(client))
        #expect(left.failure as? ProxyError == .unavailable)
        #expect(!left.failureIsOrigin)
        #expect(machine.heldBytes == 0)
    }

    @Test func theLastClientLeavingLetsAStoredBodyOfKnownLengthComplete() throws {
        var machine = try Self.machine()
        let client = Client()
        let result12 = machine.subscribe(ObjectIdentifier(client), from: 0)
        #expect(result12)
        _ = machine.headReceived(try Self.head(length: 1000))
        _ = machine.fileOpened()
        _ = machine.bodyReceived(Self.bytes(40))
        let result13 = machine.unsubscribe(ObjectIdentifier(client))
        #expect(result13.failure == nil)
        #expect(machine.isRunning)
        // Its writes still pace the origin.
        _ = machine.bodyReceived(Self.bytes(40))
        let result14 = machine.bodyReceived(Self.bytes(40))
        #expect(result14.pausesOrigin)
        // A cache file that fails leaves nothing worth the download.
        let stopped = machine.fileStopped()
        #expect(stopped.failure as? ProxyError == .unavailable)
    }

    @Test func aBackgroundDownloadGoesOnOnlyWhenWorthStoring() throws {
        var unknown = try Self.machine(unwatched: true)
        let result15 = unknown.headReceived(try Self.head(length: nil))
        #expect(result15.failure as? ProxyError == .unavailable)
        var tooLarge = try Self.machine(maxObject: 500, unwatched: true)
        let result16 = tooLarge.headReceived(try Self.head(length: 501))
        #expect(result16.failure as? ProxyError == .unavailable)
        var known = try Self.machine(maxObject: 500, unwatched: true)
        let result17 = known.headReceived(try Self.head(length: 500))
        #expect(result17.begun?.store == true)
    }

    @Test func aBodyWithoutLengthGrowingPastTheObjectCapIsRelayedNotStored() throws {
        var machine = try Self.machine(window: 1000, maxObject: 100)
        let client = Client()
        let result18 = machine.subscribe(ObjectIdentifier(client), from: 0)
        #expect(result18)
        _ = machine.headReceived(try Self.head(length: nil))
        _ = machine.fileOpened()
        let result19 = machine.bodyReceived(Self.bytes(60))
        #expect(result19.stored.count == 1)
        let past = machine.bodyReceived(Self.bytes(60))
        #expect(past.abandonsFile)
        #expect(past.stored.isEmpty)
        #expect(past.failure == nil)
        // From now on the client paces it, and its end commits nothing.
        let took = machine.progress(ObjectIdentifier(client), to: 120)
        #expect(took.memoryReleased == 120)
        let end = machine.originFinished(.success(()))
        #expect(end.committed == nil)
        #expect(end.removes)
    }

    @Test func aReadAheadNobodyWatchesIsCancelled() throws {
        var machine = try Self.machine(unwatched: true)
        _ = machine.headReceived(try Self.head(length: 100))
        let result20 = machine.cancelUnwatched(ProxyError.unavailable("left"))
        #expect(result20.failure as? ProxyError == .unavailable)
        let result21 = machine.cancelUnwatched(ProxyError.unavailable("again"))
        #expect(result21.failure == nil)
    }

    @Test func aRangeClientJoinsAtItsOffset() throws {
        var machine = try Self.machine(window: 1000, cacheable: false)
        let first = Client()
        let result22 = machine.subscribe(ObjectIdentifier(first), from: 0)
        #expect(result22)
        _ = machine.headReceived(try Self.head(length: 1000))
        for value in UInt8(1)...3 { _ = machine.bodyReceived(Self.bytes(10, value)) }
        let ranged = Client()
        let result23 = machine.subscribe(ObjectIdentifier(ranged), from: 15)
        #expect(result23)
        let view = machine.view(from: 15)
        #expect(view.chunks.map(\.readableBytes) == [5, 10])
        #expect(view.chunks.first?.getInteger(at: view.chunks.first!.readerIndex, as: UInt8.self) == 2)
    }
}
