import Foundation
import HLSTestSupport
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import HLSProxy

/// Large bodies are written a slice at a time between the event loop's other I/O (``LoopYield``): a playlist request
/// that arrives on the same loop as a 2 MiB hit is answered before the 2 MiB body's last slice is handed over — by the
/// order of the writes on the loop, not by a clock.
@Suite struct SendFairnessTests {
    /// Reads one response with a `Content-Length` body from `fd`; returns its status line and body length.
    private static func readResponse(_ fd: Int32) throws -> (status: String, bodyBytes: Int) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var headEnd: Int?
        var length = 0
        while true {
            if let end = headEnd, received.count - end >= length { break }
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { throw RawHTTP.SocketError() }
            received += buffer[0..<count]
            if headEnd == nil, let range = received.firstRange(of: Array("\r\n\r\n".utf8)) {
                headEnd = range.upperBound
                let head = String(decoding: received[0..<range.lowerBound], as: UTF8.self)
                for line in head.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                    length = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
        }
        let status = String(decoding: received.prefix { $0 != 13 }, as: UTF8.self)
        return (status, received.count - headEnd!)
    }

    @Test func aPlaylistIsAnsweredBeforeTheLastSliceOfALargeBodyOnItsLoop() async throws {
        let (order, bigTarget, playlistTarget) = try await Self.largeBodyThenPlaylist(sliceBytes: 512 << 10)
        let bigSlices = order.filter { $0.target == bigTarget }
        let playlistDone = try #require(order.firstIndex { $0.target == playlistTarget && $0.last }, "\(order)")
        let bigDone = try #require(order.firstIndex { $0.target == bigTarget && $0.last })
        #expect(bigSlices.count == 4, "2 MiB in \(bigSlices.count) writes, not 4 slices of 512 KiB")
        #expect(order.first?.target == bigTarget, "the 2 MiB request was handled first")
        #expect(playlistDone < bigDone, "the playlist waited for the whole body: \(order)")
    }

    /// `limits.sendSlice: 0`: whole bodies at once, and the playlist behind one waits for it.
    @Test func slicesCanBeTurnedOff() async throws {
        let (order, bigTarget, playlistTarget) = try await Self.largeBodyThenPlaylist(sliceBytes: 0)
        #expect(order.map(\.target) == [bigTarget, playlistTarget] && order.allSatisfy(\.last), "\(order)")
    }

    /// A connection alone on its event loop waits for nobody: its 2 MiB body goes in one write, not in slices (each
    /// slice cost a wake-up and a send more).
    @Test func aConnectionAloneOnItsLoopGetsTheWholeBodyAtOnce() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let writes = Mutex<[(target: String, last: Bool)]>([])
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory,
            configure: { configuration in
                configuration.sendSliceBytes = 512 << 10
                configuration.bodyWriteObserver = { target, last in writes.withLock { $0.append((target, last)) } }
            }, group: group)
        defer {
            Task {
                await harness.shutdown()
                try? await group.shutdownGracefully()
            }
        }
        let large = randomBytes(2 << 20)
        harness.origin.setBody(large, contentType: "video/mp2t", for: "/big.ts")
        let target = "/http/127.0.0.1:\(harness.origin.port)/big.ts"
        // Stored by a first request on a connection of its own, closed; then nothing is open on the loop.
        let first = try LoopbackSocket.connect(port: harness.port)
        LoopbackSocket.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", on: first)
        #expect(try Self.readResponse(first).bodyBytes == large.count)
        close(first)
        try await harness.waitForIdle()
        try await waitUntil("the first connection to close", interval: .milliseconds(10)) { harness.server.services.connections.count == 0 }
        writes.withLock { $0.removeAll() }

        let alone = try LoopbackSocket.connect(port: harness.port)
        defer { close(alone) }
        LoopbackSocket.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: alone)
        let answer = try await Task.detached { try Self.readResponse(alone) }.value
        #expect(answer.status == "HTTP/1.1 200 OK" && answer.bodyBytes == large.count)
        let bodyWrites = writes.withLock { $0.filter { $0.target == target } }
        #expect(bodyWrites.count == 1 && bodyWrites.allSatisfy(\.last), "\(bodyWrites.count) writes for one connection alone")
    }

    /// A 2 MiB hit and a playlist hit asked for on two connections of one event loop, both requests in the kernel
    /// before the loop looks (it finds them in one poll, the 2 MiB one first); both answers read whole.
    /// - Returns: the body writes on the loop in order, and the two targets.
    private static func largeBodyThenPlaylist(sliceBytes: Int) async throws -> (
        order: [(target: String, last: Bool)], big: String, playlist: String
    ) {
        // One event loop: both connections share it.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let writes = Mutex<[(target: String, last: Bool)]>([])
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory,
            configure: { configuration in
                configuration.sendSliceBytes = sliceBytes
                configuration.bodyWriteObserver = { target, last in writes.withLock { $0.append((target, last)) } }
            }, group: group)
        defer {
            Task {
                await harness.shutdown()
                try? await group.shutdownGracefully()
            }
        }
        let large = randomBytes(2 << 20)
        harness.origin.setBody(large, contentType: "video/mp2t", for: "/big.ts")
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<40 { text += "#EXTINF:6.0,\nseg\(index).ts\n" }
        text += "#EXT-X-ENDLIST\n"
        harness.origin.setBody(Array(text.utf8), for: "/index.m3u8")
        // Both stored (hits from here on).
        for path in ["/big.ts", "/index.m3u8"] {
            _ = try await harness.get(harness.url(path))
            try await harness.waitForIdle()
        }
        let bigTarget = "/http/127.0.0.1:\(harness.origin.port)/big.ts"
        let playlistTarget = "/http/127.0.0.1:\(harness.origin.port)/index.m3u8"

        let (big, playlist) = (try LoopbackSocket.connect(port: harness.port), try LoopbackSocket.connect(port: harness.port))
        defer {
            close(big)
            close(playlist)
        }
        // Both requests are in the kernel before the loop looks: it finds them in one poll, the 2 MiB one first.
        let blocked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        group.next().execute {
            blocked.signal()
            release.wait()
        }
        blocked.wait()
        writes.withLock { $0.removeAll() }
        LoopbackSocket.send("GET \(bigTarget) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: big)
        LoopbackSocket.send("GET \(playlistTarget) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: playlist)
        release.signal()

        async let bigResponse = Task.detached { try Self.readResponse(big) }.value
        async let playlistResponse = Task.detached { try Self.readResponse(playlist) }.value
        let (bigAnswer, playlistAnswer) = try await (bigResponse, playlistResponse)
        #expect(bigAnswer.status == "HTTP/1.1 200 OK" && bigAnswer.bodyBytes == large.count)
        #expect(playlistAnswer.status == "HTTP/1.1 200 OK" && playlistAnswer.bodyBytes > 0)

        return (writes.withLock { $0 }, bigTarget, playlistTarget)
    }
}
