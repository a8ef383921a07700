import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import NIOCore
import Testing

@testable import HLSProxy

/// Requests whose head is byte for byte one answered before with a replayed hit from memory are answered again
/// without being decoded (``ReplayedExchanges``): the same bytes on the wire, counted and logged like any request,
/// and never once the answer stopped holding.
@Suite struct ReplayedExchangeTests {
    /// One connection kept open: each exchange sends bytes and reads the responses they ask for, each framed by its
    /// `Content-Length` (HEAD: none).
    final class Connection: @unchecked Sendable {
        private let fd: Int32
        private var pending: [UInt8] = []

        init(port: Int) throws {
            fd = try LoopbackSocket.connect(port: port, readTimeout: 60)
        }

        deinit { close(fd) }

        struct Response: Equatable {
            /// The status line and header lines but `Date`, in order.
            var head: [String]
            var body: [UInt8]
            var status: Int { Int(head[0].split(separator: " ")[1]) ?? 0 }
        }

        /// Sends `bytes` in one write and reads `count` responses.
        func exchange(_ bytes: [UInt8], responses count: Int = 1, headOnly: Bool = false) async throws -> [Response] {
            try await withCheckedThrowingContinuation { continuation in
                Thread.detachNewThread {
                    continuation.resume(with: Result { try self.blockingExchange(bytes, count: count, headOnly: headOnly) })
                }
            }
        }

        private func blockingExchange(_ bytes: [UInt8], count: Int, headOnly: Bool) throws -> [Response] {
            _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var responses: [Response] = []
            while responses.count < count {
                guard let end = headEnd() else {
                    try receiveMore()
                    continue
                }
                let lines = String(decoding: pending[..<end], as: UTF8.self).components(separatedBy: "\r\n")
                let length =
                    headOnly
                    ? 0
                    : lines.first { $0.lowercased().hasPrefix("content-length:") }.flatMap {
                        Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces))
                    }
                        ?? 0
                while pending.count < end + 4 + length { try receiveMore() }
                responses.append(
                    Response(
                        head: lines.filter { !$0.lowercased().hasPrefix("date:") }, body: Array(pending[(end + 4)..<(end + 4 + length)])))
                pending.removeFirst(end + 4 + length)
            }
            return responses
        }

        private func headEnd() -> Int? {
            guard pending.count >= 4 else { return nil }
            return (0...(pending.count - 4)).first {
                pending[$0] == 13 && pending[$0 + 1] == 10 && pending[$0 + 2] == 13 && pending[$0 + 3] == 10
            }
        }

        private func receiveMore() throws {
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { throw RawHTTP.SocketError() }
            pending.append(contentsOf: buffer[0..<n])
        }
    }

    /// Serves `path` until the memory tier holds its stored object (a replayed hit from memory is what is remembered);
    /// returns it and how many requests that took. The read into the tier runs on the thread pool, so how many depends
    /// on the machine — and past a few, the harness client's own requests (the same head each time, on a kept-alive
    /// connection) are replayed exchanges too: tests count replays from after this, never from the start.
    @discardableResult
    private static func warm(_ harness: ProxyHarness, _ path: String) async throws -> (object: CachedObject, requests: Int) {
        let url = harness.url(path)
        _ = try await harness.get(url)
        var requests = 1
        try await harness.waitForIdle()
        let object = try #require(harness.store.lookup(CacheKey(try OriginURL(harness.originURL(path)))))
        let deadline = ContinuousClock.now + .seconds(120)
        while !harness.server.services.memory.holds(object) && ContinuousClock.now < deadline {
            _ = try await harness.get(url)
            requests += 1
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(harness.server.services.memory.holds(object), "never read into memory")
        return (object, requests)
    }

    /// Sends `request` on `connection` until one is answered without being decoded (its rewritten copy or object is
    /// read into memory after a few hits, on the thread pool: how soon depends on the machine); returns that answer.
    private static func untilReplayed(_ harness: ProxyHarness, _ connection: Connection, _ request: [UInt8]) async throws
        -> Connection.Response
    {
        let before = try await harness.server.replayedRequests()
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let response = try await connection.exchange(request)[0]
            if try await harness.server.replayedRequests() > before { return response }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("never replayed")
        throw RawHTTP.SocketError()
    }

    /// Sends `request` on `connection` until one is answered on an earlier answer's check alone (``ReplayCheck``);
    /// returns that answer. The harness must run the memory tier on a clock moved by hand
    /// (`ProxyConfiguration.memoryTierClock`): a check lapses once its copy's file is due for another look
    /// (``MemoryTier/recheckInterval``), so on the real clock two requests more than a second apart — a loaded
    /// machine — are never answered so.
    private static func untilSentOnCheck(_ harness: ProxyHarness, _ connection: Connection, _ request: [UInt8]) async throws
        -> Connection.Response
    {
        let before = try await harness.server.replayedRequests(onEarlierCheck: true)
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let response = try await connection.exchange(request)[0]
            if try await harness.server.replayedRequests(onEarlierCheck: true) > before { return response }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("never sent on an earlier check")
        throw RawHTTP.SocketError()
    }

    /// Sends `request` once; returns the answer and whether it was replayed, and sent on an earlier check.
    private static func once(_ harness: ProxyHarness, _ connection: Connection, _ request: [UInt8]) async throws
        -> (response: Connection.Response, replayed: Bool, onCheck: Bool)
    {
        let replayed = try await harness.server.replayedRequests()
        let onCheck = try await harness.server.replayedRequests(onEarlierCheck: true)
        let response = try await connection.exchange(request)[0]
        return (
            response, try await harness.server.replayedRequests() > replayed,
            try await harness.server.replayedRequests(onEarlierCheck: true) > onCheck
        )
    }

    private static func request(_ harness: ProxyHarness, _ path: String, extra: String = "") -> [UInt8] {
        request(port: harness.port, originPort: harness.origin.port, path, extra: extra)
    }

    private static func request(port: Int, originPort: Int, _ path: String, extra: String = "") -> [UInt8] {
        Array("GET /http/127.0.0.1:\(originPort)\(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUser-Agent: t\r\n\(extra)\r\n".utf8)
    }

    @Test func theSameHeadIsAnsweredAgainWithTheSameBytesCountedAndLogged() async throws {
        let capture = LogCapture()
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory, configure: { $0.prefetchSegments = 0 },
            accessLogger: capture.logger(label: "hlscache.access"))
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(50_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/a.ts")
        let warmRequests = try await Self.warm(harness, "/a.ts").requests
        let replayedBefore = try await harness.server.replayedRequests()
        let connection = try Connection(port: harness.port)
        let request = Self.request(harness, "/a.ts")
        // The first is decoded (and remembered), the next four are not.
        var responses: [Connection.Response] = []
        for _ in 0..<5 { responses += try await connection.exchange(request) }
        #expect(try await harness.server.replayedRequests() == replayedBefore + 4)
        #expect(responses.allSatisfy { $0 == responses[0] })
        #expect(responses[0].status == 200 && sameBytes(responses[0].body, body))
        #expect(responses[0].head.contains("X-Cache: HIT"))
        // Five requests in one write: answered in order, the same way.
        // (The first is replayed; each next one is too when the answer before it was written out at once, else it is
        // decoded: either way the same answer.)
        let five = try await connection.exchange(Array(Array(repeating: request, count: 5).joined()), responses: 5)
        #expect(five == Array(repeating: responses[0], count: 5))
        #expect((5...9).contains(try await harness.server.replayedRequests() - replayedBefore))
        // The same head on another connection is answered from the same table (one per event loop) or decoded.
        let other = try Connection(port: harness.port)
        #expect(try await other.exchange(request) == [responses[0]])

        await harness.shutdown()
        // Counted, not read before: a warm-up request's line can be written after its client has the answer.
        let fields = try capture.objects().dropFirst(warmRequests).compactMap { $0["metadata"] as? [String: String] }
        #expect(fields.count == 11, "one access-log line per request")
        #expect(
            fields.allSatisfy {
                $0["status"] == "200" && $0["cache"] == "hit" && $0["bytes"] == String(body.count) && $0["remote"] == "127.0.0.1"
            })
        #expect(harness.origin.requests(matching: "/a.ts").count == 1)
    }

    /// A rewritten playlist replayed the same way, and a remembered head that stops holding: the object removed from
    /// the cache (the next one is a miss, decoded), another version (never the old bytes).
    @Test func aRememberedHeadWhoseAnswerStoppedHoldingIsDecoded() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory, configure: { $0.prefetchSegments = 0 })
        defer { Task { await harness.shutdown() } }
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<20 { playlist += "#EXTINF:6.0,\nseg\(index).ts\n" }
        playlist += "#EXT-X-ENDLIST\n"
        harness.origin.setBody(Array(playlist.utf8), contentType: "application/vnd.apple.mpegurl", for: "/v/index.m3u8")
        let connection = try Connection(port: harness.port)
        let request = Self.request(harness, "/v/index.m3u8")
        let decoded = try await connection.exchange(request)[0]
        let first = try await Self.untilReplayed(harness, connection, request)
        #expect(first.body == decoded.body, "the decoded answer (a miss) and the replayed one differ")
        let text = String(decoding: first.body, as: UTF8.self)
        #expect(first.status == 200 && text.contains("/http/127.0.0.1:\(harness.origin.port)/v/seg19.ts"), "not rewritten: \(text)")
        let replayed = try await harness.server.replayedRequests()
        #expect(try await connection.exchange(request) == [first])
        #expect(try await harness.server.replayedRequests() == replayed + 1)
        let object = try #require(harness.store.lookup(CacheKey(try OriginURL(harness.originURL("/v/index.m3u8")))))

        // Removed from the cache: decoded and fetched again.
        let changed = playlist.replacingOccurrences(of: "seg19.ts", with: "seg19b.ts")
        harness.origin.setBody(Array(changed.utf8), contentType: "application/vnd.apple.mpegurl", for: "/v/index.m3u8")
        try harness.store.remove(object.key)
        let refetched = try await connection.exchange(request)[0]
        #expect(String(decoding: refetched.body, as: UTF8.self).contains("seg19b.ts"))
        #expect(try await harness.server.replayedRequests() == replayed + 1)
        #expect(harness.origin.requests(matching: "/v/index.m3u8").count == 2)
    }

    /// What bounds a table in ``aLoopLargerThanTheTableKeepsTheHeadsInUse(_:)``.
    enum TableBound: CaseIterable {
        /// Two entries.
        case entries
        /// The memory of two and a half entries (``ReplayedExchange/estimatedBytes(headBytes:)``), entries unbounded.
        case bytes
    }

    /// A table smaller than what players walk keeps the heads in use instead of pushing each out just before it is
    /// asked for again (as least-recently-used order would on a loop): with room for two heads — by their number or
    /// by their memory — a loop over three objects keeps replaying two of them; a head left unused for twice the
    /// table's size in lookups gives way to a new one. The table's memory never exceeds its bound.
    @Test(arguments: TableBound.allCases)
    func aLoopLargerThanTheTableKeepsTheHeadsInUse(_ bound: TableBound) async throws {
        // The three heads have the same length (one-letter names); the ports are not known yet, so the bound is two
        // and a half heads with the longest ports — three heads with the shortest take more (8 bytes less each).
        let longest = Self.request(port: 65535, originPort: 65535, "/a.ts").count
        let budget = 5 * ReplayedExchange.estimatedBytes(headBytes: longest) / 2
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.prefetchSegments = 0
            configuration.memoryCacheBytes = 0
            switch bound {
            case .entries: configuration.replayedHeadsPerLoop = 2
            case .bytes: configuration.replayedHeadBytesPerLoop = budget
            }
        }
        defer { Task { await harness.shutdown() } }
        for name in ["a", "b", "c"] { harness.origin.setBody(randomBytes(5_000), contentType: "video/mp2t", for: "/\(name).ts") }
        let connection = try Connection(port: harness.port)
        let requests = ["a", "b", "c"].map { Self.request(harness, "/\($0).ts") }
        // Stored, then each answered with a rendered head once (remembered from then on, room permitting).
        for _ in 0..<2 {
            for request in requests { _ = try await connection.exchange(request) }
        }
        try await harness.waitForIdle()
        for _ in 0..<2 {
            for request in requests { _ = try await connection.exchange(request) }
        }
        // The loop: each pass replays the two heads that found room, never the third — in least-recently-used order it
        // would push out the head asked for next and replay nothing.
        var replayedPerPass: [Int] = []
        for _ in 0..<4 {
            var replayed = 0
            for request in requests where try await Self.once(harness, connection, request).replayed { replayed += 1 }
            replayedPerPass.append(replayed)
        }
        #expect(replayedPerPass == [2, 2, 2, 2])
        // Only "c" asked for a while: the other two fall idle (four lookups) and it takes one's place.
        for _ in 0..<6 { _ = try await connection.exchange(requests[2]) }
        #expect(try await Self.once(harness, connection, requests[2]).replayed)
        let bytes = try await harness.server.replayedHeadBytes()
        #expect(bytes.max() == 2 * ReplayedExchange.estimatedBytes(headBytes: requests[0].count), "\(bytes)")
        if bound == .bytes { #expect(bytes.allSatisfy { $0 <= budget }) }
    }

    /// With the memory tier off, hits are sent from their files — and their heads replayed all the same: the same
    /// bytes as the decoded answer, never once the object changed.
    @Test func aHitFromItsFileIsReplayedToo() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.prefetchSegments = 0
            configuration.memoryCacheBytes = 0
        }
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(300_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/f.ts")
        let connection = try Connection(port: harness.port)
        let request = Self.request(harness, "/f.ts")
        let miss = try await connection.exchange(request)[0]
        try await harness.waitForIdle()
        let decoded = try await Self.once(harness, connection, request)
        #expect(!decoded.replayed && sameBytes(decoded.response.body, body))
        #expect(decoded.response.head.contains("X-Cache: HIT") && miss.head.contains("X-Cache: MISS"))
        // (The first hit renders the head, the second is answered with it and remembered, the third is replayed.)
        #expect(try await Self.untilReplayed(harness, connection, request) == decoded.response)
        for _ in 0..<3 {
            let replayed = try await Self.once(harness, connection, request)
            #expect(replayed.replayed && !replayed.onCheck && replayed.response == decoded.response)
        }
        #expect(harness.server.services.memory.usage.count == 0)
        // Another version stored: never the old bytes (decoded, then replayed again).
        let replacement = randomBytes(300_000)
        let key = CacheKey(try OriginURL(harness.originURL("/f.ts")))
        let writer = try harness.store.makeWriter(for: key, expectedLength: 300_000)
        try writer.write(replacement)
        _ = try writer.finish(contentType: "video/mp2t", kind: .segment)
        let replaced = try await Self.once(harness, connection, request)
        #expect(!replaced.replayed && sameBytes(replaced.response.body, replacement))
        #expect(sameBytes(try await Self.untilReplayed(harness, connection, request).body, replacement))
        #expect(harness.origin.requests(matching: "/f.ts").count == 1)
    }

    /// A small body replayed once is sent again on that check alone (``ReplayCheck``) — and never once anything the
    /// check looked at changed: the tier's file check due (its clock moved), the copy gone from the tier, another
    /// version stored, the object removed. Each is answered as the ordinary path answers, then on a check again.
    @Test func anAnswerIsSentOnItsCheckOnlyWhileNothingItLookedAtChanged() async throws {
        let clock = StepClock()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.prefetchSegments = 0
            configuration.memoryTierClock = { clock.now }
        }
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(30_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/c.ts")
        let object = try await Self.warm(harness, "/c.ts").object
        let connection = try Connection(port: harness.port)
        let request = Self.request(harness, "/c.ts")
        let first = try await Self.untilSentOnCheck(harness, connection, request)
        #expect(first.status == 200 && sameBytes(first.body, body))
        let again = try await Self.once(harness, connection, request)
        #expect(again.onCheck && again.response == first)

        // The tier's file check falls due: checked again (the same file: replayed), then on that check.
        clock.advance(MemoryTier.recheckInterval)
        let due = try await Self.once(harness, connection, request)
        #expect(due.replayed && !due.onCheck && due.response == first)
        #expect(try await Self.once(harness, connection, request).onCheck)

        // The copy leaves the tier: replayed from the file (checked: not on the earlier check), the same bytes.
        harness.server.services.memory.remove([object.key])
        let fromFile = try await Self.once(harness, connection, request)
        #expect(fromFile.replayed && !fromFile.onCheck && fromFile.response == first)

        // Another version stored (as a new fetch would): never the old bytes.
        _ = try await Self.warm(harness, "/c.ts")
        _ = try await Self.untilSentOnCheck(harness, connection, request)
        let replacement = randomBytes(30_000)
        let writer = try harness.store.makeWriter(for: object.key, expectedLength: 30_000)
        try writer.write(replacement)
        _ = try writer.finish(contentType: "video/mp2t", kind: .segment)
        let replaced = try await Self.once(harness, connection, request)
        #expect(!replaced.onCheck && sameBytes(replaced.response.body, replacement), "the old version was sent")

        // Removed: a miss, fetched again.
        _ = try await Self.warm(harness, "/c.ts")
        _ = try await Self.untilSentOnCheck(harness, connection, request)
        let fetched = randomBytes(30_000)
        harness.origin.setBody(fetched, contentType: "video/mp2t", for: "/c.ts")
        try harness.store.remove(object.key)
        let removed = try await Self.once(harness, connection, request)
        #expect(!removed.replayed && sameBytes(removed.response.body, fetched), "the removed object was sent")
        #expect(harness.origin.requests(matching: "/c.ts").count == 2)
    }

    /// A playlist sent on its check for one token: once it is fetched for another token, the first token's head is
    /// checked again (not the other token's copy, and fetched again for its own).
    @Test func aPlaylistFetchedForOtherTokensIsNotSentOnAnEarlierCheck() async throws {
        // The tier's clock stands still: a check also lapses once the copy's file is due for another look
        // (``MemoryTier/recheckInterval``, 1 s), so on the real clock a machine that took over a second between two
        // requests never saw one sent on a check — and a lapsed check would pass the last expectation for a reason
        // other than the tokens.
        let clock = StepClock()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
            configuration.prefetchSegments = 0
            configuration.memoryTierClock = { clock.now }
        }
        defer { Task { await harness.shutdown() } }
        func media(_ token: String) -> [UInt8] {
            Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg0.ts?token=\(token)\n#EXT-X-ENDLIST\n".utf8)
        }
        for token in ["A", "B"] { harness.origin.setBody(media(token), for: "/tok/index.m3u8?token=\(token)") }
        let connection = try Connection(port: harness.port)
        let requestA = Self.request(harness, "/tok/index.m3u8?token=A")
        let sentA = try await Self.untilSentOnCheck(harness, connection, requestA)
        #expect(String(decoding: sentA.body, as: UTF8.self).contains("seg0.ts?token=A"))
        #expect(harness.origin.requests(matching: "/tok/index.m3u8?token=A").count == 1)

        let answerB = try await connection.exchange(Self.request(harness, "/tok/index.m3u8?token=B"))[0]
        #expect(String(decoding: answerB.body, as: UTF8.self).contains("seg0.ts?token=B"))
        let answerA = try await Self.once(harness, connection, requestA)
        #expect(!answerA.onCheck, "sent on a check made before the playlist was fetched for other tokens")
        #expect(String(decoding: answerA.response.body, as: UTF8.self).contains("seg0.ts?token=A"))
        #expect(harness.origin.requests(matching: "/tok/index.m3u8?token=A").count == 2)
    }

    /// Heads that must be decoded every time: a request with a body (its bytes follow the head), one refused by the
    /// Host check, a range, HEAD; and bytes that only look like the start of a remembered head.
    @Test func headsThatMustBeDecodedAreNeverReplayed() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory, configure: { $0.prefetchSegments = 0 })
        defer { Task { await harness.shutdown() } }
        let body = randomBytes(30_000)
        harness.origin.setBody(body, contentType: "video/mp2t", for: "/b.ts")
        _ = try await Self.warm(harness, "/b.ts")
        let replayedBefore = try await harness.server.replayedRequests()
        let connection = try Connection(port: harness.port)
        let path = "/http/127.0.0.1:\(harness.origin.port)/b.ts"
        // A GET with a body: the body is not read as the next request, and the head is not remembered.
        let withBody = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello".utf8)
        for _ in 0..<3 {
            let response = try await connection.exchange(withBody)[0]
            #expect(response.status == 200 && sameBytes(response.body, body))
        }
        let range = Self.request(harness, "/b.ts", extra: "Range: bytes=0-9\r\n")
        for _ in 0..<3 { #expect(try await connection.exchange(range)[0].body == Array(body[0..<10])) }
        let head = Array("HEAD \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        for _ in 0..<3 { #expect(try await connection.exchange(head, headOnly: true)[0].status == 200) }
        #expect(try await harness.server.replayedRequests() == replayedBefore)
        // No Host: 400 each time, and the connection closes.
        let noHost = Array("GET \(path) HTTP/1.1\r\nUser-Agent: t\r\n\r\n".utf8)
        for _ in 0..<2 {
            let refused = try await RawHTTP.exchange(port: harness.port, noHost)
            #expect(refused.response.hasPrefix("HTTP/1.1 400") && refused.closedByPeer)
        }
        // A remembered head, then one that differs only in a field, then the remembered one again, in one write: the
        // first is replayed; the second is decoded, and NIO's decoder takes the third with it (decoded too).
        let plain = Self.request(harness, "/b.ts")
        _ = try await connection.exchange(plain)
        let replayed = try await harness.server.replayedRequests()
        let twin = Self.request(harness, "/b.ts", extra: "X-Other: 1\r\n")
        let answers = try await connection.exchange(plain + twin + plain, responses: 3)
        #expect(answers.allSatisfy { $0.status == 200 && sameBytes($0.body, body) })
        #expect(try await harness.server.replayedRequests() == replayed + 1)
    }

    /// A read that is exactly a remembered head is answered before the decoder sees it (``RequestDecoder/replayWhole(_:)``)
    /// only at a request boundary: the same bytes arriving as another request's body are that body.
    @Test func aRememberedHeadArrivingAsARequestBodyIsReadAsTheBody() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory, configure: { $0.prefetchSegments = 0 })
        defer { Task { await harness.shutdown() } }
        let segment = randomBytes(30_000)
        let other = randomBytes(20_000)
        harness.origin.setBody(segment, contentType: "video/mp2t", for: "/b.ts")
        harness.origin.setBody(other, contentType: "video/mp2t", for: "/c.ts")
        _ = try await Self.warm(harness, "/b.ts")
        _ = try await Self.warm(harness, "/c.ts")
        let connection = try Connection(port: harness.port)
        let remembered = Self.request(harness, "/b.ts")
        #expect(sameBytes(try await Self.untilReplayed(harness, connection, remembered).body, segment))
        let replayed = try await harness.server.replayedRequests()
        // A request for c.ts whose body is the remembered head's bytes, sent in a write of their own once its head is
        // on its way (so that they usually arrive as a read of their own; arriving together they are decoded together,
        // and the check holds all the same).
        let carrier = Array(
            ("GET /http/127.0.0.1:\(harness.origin.port)/c.ts HTTP/1.1\r\nHost: 127.0.0.1:\(harness.port)\r\n"
                + "Content-Length: \(remembered.count)\r\n\r\n").utf8)
        _ = try await connection.exchange(carrier, responses: 0)
        try await Task.sleep(for: .milliseconds(300))
        let answer = try await connection.exchange(remembered)[0]
        #expect(answer.status == 200 && sameBytes(answer.body, other), "the body was answered as a request")
        // The connection goes on in step: the next request is answered with its own object.
        let next = try await connection.exchange(Self.request(harness, "/c.ts"))[0]
        #expect(next.status == 200 && sameBytes(next.body, other))
        #expect(try await harness.server.replayedRequests() == replayed)
    }

    /// A reload's `http.allowedWebOrigins` judges the next request on a connection already open (each connection keeps
    /// the policy it read until the version moves: ``LiveWebOrigins``).
    @Test func aReloadedWebOriginPolicyJudgesTheNextRequestOnAnOpenConnection() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory, configure: { $0.prefetchSegments = 0 })
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(randomBytes(20_000), contentType: "video/mp2t", for: "/b.ts")
        _ = try await Self.warm(harness, "/b.ts")
        let connection = try Connection(port: harness.port)
        let fromPage = Self.request(harness, "/b.ts", extra: "Origin: https://player.example\r\n")
        func allowed(_ response: Connection.Response) -> String? {
            response.head.first { $0.lowercased().hasPrefix("access-control-allow-origin:") }.map {
                String($0.dropFirst("access-control-allow-origin:".count)).trimmingCharacters(in: .whitespaces)
            }
        }
        for _ in 0..<3 { #expect(allowed(try await connection.exchange(fromPage)[0]) == nil) }
        harness.server.setWebOrigins(try WebOriginPolicy(parsing: ["https://player.example"]))
        for _ in 0..<3 { #expect(allowed(try await connection.exchange(fromPage)[0]) == "https://player.example") }
        harness.server.setWebOrigins(.default)
        for _ in 0..<3 { #expect(allowed(try await connection.exchange(fromPage)[0]) == nil) }
    }

    @Test func headLengthIsFoundOnlyForWholeGetHeads() {
        func length(_ text: String) -> Int? {
            let buffer = ByteBuffer(string: text)
            return ReplayedExchanges.getHeadLength(buffer.readableBytesView)
        }
        let head = "GET /http/example.com/a.ts HTTP/1.1\r\nHost: x\r\n\r\n"
        #expect(length(head) == head.utf8.count)
        #expect(length(head + "GET /next HTTP/1.1\r\n") == head.utf8.count)
        #expect(length(String(decoding: head.utf8.dropLast(1), as: UTF8.self)) == nil)
        #expect(length("POST /http/example.com/a.ts HTTP/1.1\r\nHost: x\r\n\r\n") == nil)
        #expect(length("GET /http/example.com/a.ts HTTP/1.1\nHost: x\n\n") == nil)
        #expect(length("GET /a HTTP/1.1\r\nHost: x\r\nA: \r\r\n\r\n") == "GET /a HTTP/1.1\r\nHost: x\r\nA: \r\r\n\r\n".utf8.count)
        #expect(length("GET /a HTTP/1.1\r\nX: " + String(repeating: "a", count: 3000) + "\r\n\r\n") == nil)
        // Every split point of a head: found only once it is whole.
        for cut in 0..<head.utf8.count { #expect(length(String(decoding: head.utf8.prefix(cut), as: UTF8.self)) == nil, "\(cut)") }
    }

    @Test func headsDifferingInOneByteHashApart() {
        func hash(_ bytes: [UInt8]) -> Int {
            let buffer = ByteBuffer(bytes: bytes)
            return ReplayedExchanges.hash(buffer.readableBytesView)
        }
        // A player's head, and every change of one of its bytes (a whole word and a tail byte alike).
        let head = Array("GET /http/cdn.example.com/v/seg00042.ts HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: p\r\n\r\n".utf8)
        let original = hash(head)
        #expect(hash(head) == original, "the same bytes, the same hash")
        var seen: Set<Int> = [original]
        for index in head.indices {
            for flip: UInt8 in [1, 0x20, 0x80] {
                var changed = head
                changed[index] ^= flip
                #expect(seen.insert(hash(changed)).inserted, "byte \(index) ^ \(flip)")
            }
        }
        // Lengths matter too: no two prefixes of the head hash alike.
        var prefixes: Set<Int> = []
        for count in 0...head.count { #expect(prefixes.insert(hash(Array(head.prefix(count)))).inserted, "\(count) bytes") }
    }

    /// A live playlist's reload is answered without being decoded, as the version in memory when it comes (its head
    /// rendered once per version and `max-age`): the same bytes as the decoded answer, `max-age` counting down on
    /// the playlist clock, and once that version expired the next one from the origin — never a stale one.
    @Test func aLivePlaylistReloadIsAnsweredAsTheVersionInMemoryNow() async throws {
        // The TTL runs on a clock moved by hand: target duration 8 s, served from memory for 4 s.
        let clock = StepClock()
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) {
            $0.livePlaylistClock = { clock.now }
            $0.prefetchSegments = 0
        }
        defer { Task { await harness.shutdown() } }
        harness.origin.setBody(Array(PlaylistServingTests.live(sequence: 10, targetDuration: 8).utf8), for: "/live/index.m3u8")
        let connection = try Connection(port: harness.port)
        let request = Self.request(harness, "/live/index.m3u8")
        let miss = try await Self.once(harness, connection, request)
        #expect(!miss.replayed && miss.response.head.contains("X-Cache: MISS"), "\(miss.response.head)")
        // From memory, decoded (and remembered), then replayed.
        let first = try await Self.once(harness, connection, request)
        #expect(!first.replayed)
        #expect(first.response.status == 200 && first.response.body == miss.response.body)
        #expect(String(decoding: first.response.body, as: UTF8.self).contains("MEDIA-SEQUENCE:10"))
        #expect(first.response.head.contains("Cache-Control: max-age=4"), "\(first.response.head)")
        #expect(first.response.head.contains("X-Cache: HIT"), "\(first.response.head)")
        let again = try await Self.once(harness, connection, request)
        #expect(again.replayed)
        #expect(again.response == first.response)
        // The prepared head says what the ordinary answer says (a request that is not a plain fetch gets that one).
        let conditional = Self.request(harness, "/live/index.m3u8", extra: "If-None-Match: \"x\"\r\n")
        let ordinary = try await Self.once(harness, connection, conditional)
        #expect(!ordinary.replayed)
        #expect(ordinary.response == first.response)

        // A new version at the origin is not asked for while this one lives; max-age counts down.
        harness.origin.setBody(Array(PlaylistServingTests.live(sequence: 11, targetDuration: 8).utf8), for: "/live/index.m3u8")
        clock.advance(.seconds(1))
        let later = try await Self.once(harness, connection, request)
        #expect(later.replayed)
        #expect(later.response.body == first.response.body)
        #expect(later.response.head == first.response.head.map { $0 == "Cache-Control: max-age=4" ? "Cache-Control: max-age=3" : $0 })
        #expect(harness.origin.requests(matching: "/live/index.m3u8").count == 1)

        // Expired: not replayed (nothing in memory), fetched again and answered with the new version, which the
        // same bytes then get from memory and replay.
        clock.advance(.milliseconds(3100))
        let fresh = try await Self.once(harness, connection, request)
        #expect(!fresh.replayed)
        #expect(String(decoding: fresh.response.body, as: UTF8.self).contains("MEDIA-SEQUENCE:11"), "never stale")
        #expect(harness.origin.requests(matching: "/live/index.m3u8").count == 2)
        let freshHit = try await Self.once(harness, connection, request)
        #expect(!freshHit.replayed && freshHit.response.body == fresh.response.body)
        let freshAgain = try await Self.once(harness, connection, request)
        #expect(freshAgain.replayed)
        #expect(freshAgain.response == freshHit.response)

        // A gzip client gets its form (gzipped when the playlist is long enough to have a gzipped copy), replayed
        // the same way.
        let gzip = Self.request(harness, "/live/index.m3u8", extra: "Accept-Encoding: gzip\r\n")
        let zipped = try await Self.once(harness, connection, gzip)
        let zippedAgain = try await Self.once(harness, connection, gzip)
        #expect(!zipped.replayed && zippedAgain.replayed)
        #expect(zippedAgain.response == zipped.response)
        #expect(zipped.response.head.contains("Content-Encoding: gzip") == (zipped.response.body != fresh.response.body))
    }
}
