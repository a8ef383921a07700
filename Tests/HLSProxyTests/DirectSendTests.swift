import Foundation
import HLSTestSupport
import NIOCore
import NIOEmbedded
import NIOPosix
import Synchronization
import Testing

@testable import HLSProxy

/// A hit's response goes straight to the socket with `sendmsg` (and `sendfile` for a file) (``ConnectionSocket``), and
/// what the kernel does not take at once through the channel behind it: the client gets the same bytes either way.
@Suite struct DirectSendTests {
    /// What the server told of its direct sends: target, bytes taken at once, all bytes.
    typealias DirectSend = (target: String, sentAtOnce: Int64, total: Int64)

    final class Sends: Sendable {
        let list = Mutex<[DirectSend]>([])
        var all: [DirectSend] { list.withLock { $0 } }
    }

    /// Where a hit's body comes from.
    enum Source: CaseIterable, Sendable {
        case file
        case memory
    }

    /// A harness with slices off (every hit is sent whole) that records its direct sends, with `big` stored at
    /// `/big.ts`; from `.file`: the memory tier off; from `.memory`: held in the tier, and its file overwritten with
    /// other bytes of the same length (only an answer from memory has the right ones).
    private static func start(
        _ sends: Sends, big: [UInt8], from source: Source = .file
    ) async throws -> (harness: ProxyHarness, target: String) {
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory,
            configure: { configuration in
                configuration.memoryCacheBytes = source == .file ? 0 : 4 * big.count
                configuration.memoryMaxObjectBytes = 2 * big.count
                configuration.sendSliceBytes = 0
                configuration.directSendObserver = { target, atOnce, total in sends.list.withLock { $0.append((target, atOnce, total)) } }
            })
        harness.origin.setBody(big, contentType: "video/mp2t", for: "/big.ts")
        let url = harness.url("/big.ts")
        do {
            _ = try await harness.get(url)
            try await harness.waitForIdle()
            if source == .memory {
                let object = try await MemoryTierTests.warm(harness, url, "/big.ts")
                try MemoryTierTests.scribble(over: object)
            }
        } catch {
            // The caller never gets the harness to shut down.
            await harness.shutdown()
            throw error
        }
        sends.list.withLock { $0.removeAll() }
        return (harness, "/http/127.0.0.1:\(harness.origin.port)/big.ts")
    }

    /// Reads `count` responses with `Content-Length` bodies from `fd`, in order: each one's status line and body.
    /// Bytes that are not a response head where one should start (a body longer than it said) end the reading.
    private static func readResponses(_ count: Int, from fd: Int32) throws -> [(status: String, body: [UInt8])] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var responses: [(String, [UInt8])] = []
        var head: (status: String, length: Int, end: Int)?
        while responses.count < count {
            if head == nil, let range = received.prefix(16 << 10).firstRange(of: Array("\r\n\r\n".utf8)) {
                let lines = received[..<range.lowerBound].split(separator: UInt8(ascii: "\n")).map {
                    String(decoding: $0.filter { $0 != UInt8(ascii: "\r") }, as: Unicode.ASCII.self)
                }
                var length = 0
                for line in lines where line.lowercased().hasPrefix("content-length:") {
                    length = Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
                head = (lines.first ?? "", length, range.upperBound)
            }
            if head == nil, received.count >= 16 << 10 { throw RawHTTP.SocketError() }
            if let (status, length, end) = head, received.count - end >= length {
                responses.append((status, Array(received[end..<end + length])))
                received.removeFirst(end + length)
                head = nil
                continue
            }
            let read = recv(fd, &buffer, buffer.count, 0)
            guard read > 0 else { throw RawHTTP.SocketError() }
            received += buffer[0..<read]
        }
        return responses
    }

    /// Two pipelined hits of a 2 MiB object: both sent directly, both bodies the object's bytes.
    @Test(arguments: Source.allCases) func aHitGoesStraightToTheSocket(from source: Source) async throws {
        let sends = Sends()
        let big = randomBytes(2 << 20)
        let (harness, target) = try await Self.start(sends, big: big, from: source)
        defer { Task { await harness.shutdown() } }

        let fd = try LoopbackSocket.connect(port: harness.port, readTimeout: 60)
        defer { close(fd) }
        LoopbackSocket.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: fd)
        let responses = try await Task.detached { try Self.readResponses(2, from: fd) }.value
        for response in responses {
            #expect(response.status == "HTTP/1.1 200 OK")
            // Compared apart: a failed #expect would print both arrays whole.
            let same = response.body == big
            #expect(same, "the body differs from the object's (\(response.body.count) bytes)")
        }
        let seen = sends.all
        #expect(seen.count == 2 && seen.allSatisfy { $0.target == target && $0.total > Int64(big.count) && $0.sentAtOnce > 0 }, "\(seen)")
    }

    /// A client that reads nothing while its answer is sent (a 4 KiB receive window): the kernel takes only part of
    /// it at once, and the rest follows through the channel, in order — then the next pipelined hit. The body is
    /// twice what a socket's send buffer can grow to (`tcp_wmem`; on loopback it starts at about 2.5 MiB).
    @Test(arguments: Source.allCases) func whatTheKernelDoesNotTakeAtOnceFollowsThroughTheChannel(from source: Source) async throws {
        let sends = Sends()
        let bufferLimit =
            (try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_wmem", encoding: .utf8))
            .flatMap { $0.split(whereSeparator: \.isWhitespace).last.flatMap { Int($0) } } ?? (4 << 20)
        let big = randomBytes(2 * bufferLimit)
        let (harness, target) = try await Self.start(sends, big: big, from: source)
        defer { Task { await harness.shutdown() } }

        let fd = try LoopbackSocket.connect(port: harness.port, receiveBuffer: 4096, readTimeout: 60)
        defer { close(fd) }
        LoopbackSocket.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: fd)
        // Nothing is read until the first answer was handed over.
        let first = try await eventually("a direct send", interval: .milliseconds(10)) { sends.all.first }
        #expect(first.sentAtOnce > 0 && first.sentAtOnce < first.total, "\(first): all taken at once by a client that reads nothing")
        let responses = try await Task.detached { try Self.readResponses(2, from: fd) }.value
        for response in responses {
            #expect(response.status == "HTTP/1.1 200 OK")
            // Compared apart: a failed #expect would print both arrays whole.
            let same = response.body == big
            #expect(same, "the body differs from the object's (\(response.body.count) bytes)")
        }
        #expect(sends.all.count == 2)
    }

    /// A client that left before its answer: the send fails, the connection closes, and the server (the process:
    /// `sendfile` to a closed peer raises SIGPIPE) answers the next client.
    @Test func aClientThatLeftEndsItsConnectionAndNothingElse() async throws {
        let sends = Sends()
        let big = randomBytes(2 << 20)
        let (harness, target) = try await Self.start(sends, big: big)
        defer { Task { await harness.shutdown() } }

        for _ in 0..<20 {
            let fd = try LoopbackSocket.connect(port: harness.port, receiveBuffer: 4096, readTimeout: 60)
            LoopbackSocket.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: fd)
            // Gone (a reset) once the first bytes arrive: the rest of the 2 MiB meets a closed connection.
            var byte: UInt8 = 0
            _ = recv(fd, &byte, 1, 0)
            var linger = linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
            close(fd)
        }
        try await harness.waitForIdle()
        let fd = try LoopbackSocket.connect(port: harness.port, readTimeout: 60)
        defer { close(fd) }
        LoopbackSocket.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", on: fd)
        let response = try #require(try await Task.detached { try Self.readResponses(1, from: fd) }.value.first)
        let same = response.body == big
        #expect(response.status == "HTTP/1.1 200 OK" && same)
        #expect(sends.all.count == 21)
    }

    /// The socket's own sends, on a loopback connection whose peer does not read and then closes.
    @Test func aSocketSendsWhatTheKernelTakesAndReportsAClosedPeer() throws {
        let (server, client) = try Self.connectedPair(receiveBuffer: 4096)
        defer { close(server) }
        _ = fcntl(server, F_SETFL, fcntl(server, F_GETFL) | O_NONBLOCK)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("direct-\(UUID().uuidString)").path
        let bytes = randomBytes(4 << 20)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = open(path, O_RDONLY)
        defer { close(file) }
        let socket = ConnectionSocket(descriptor: server)

        var head = ByteBuffer(string: "HTTP/1.1 200 OK\r\n")
        head.writeString("Content-Length: \(bytes.count)\r\n")
        #expect(socket.send(head, ByteBuffer(string: "\r\n"), more: true) == .all)
        guard case .partly(let taken) = socket.sendFile(file, offset: 0, length: Int64(bytes.count)) else {
            Issue.record("4 MiB taken at once by a peer that reads nothing")
            close(client)
            return
        }
        #expect(taken < Int64(bytes.count))
        // Some of what was taken is the file's from its start.
        var start = [UInt8](repeating: 0, count: 64)
        var received = 0
        while received < head.readableBytes + 2 + start.count {
            var chunk = [UInt8](repeating: 0, count: head.readableBytes + 2 + start.count - received)
            let count = recv(client, &chunk, chunk.count, 0)
            guard count > 0 else { break }
            for (index, byte) in chunk[0..<count].enumerated() where received + index >= head.readableBytes + 2 {
                start[received + index - head.readableBytes - 2] = byte
            }
            received += count
        }
        let same = start == Array(bytes[0..<64])
        #expect(same)

        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
        close(client)
        // The reset arrives; sending fails from then on (without SIGPIPE ending the test process).
        var result = socket.sendFile(file, offset: taken, length: Int64(bytes.count) - taken)
        for _ in 0..<1000 where result != .failed(EPIPE) && result != .failed(ECONNRESET) {
            usleep(1000)
            result = socket.sendFile(file, offset: taken, length: Int64(bytes.count) - taken)
        }
        #expect(result == .failed(EPIPE) || result == .failed(ECONNRESET), "\(result)")
        let sent = socket.send(ByteBuffer(string: "x"), ByteBuffer(), more: false)
        #expect(sent == .failed(EPIPE) || sent == .failed(ECONNRESET), "\(sent)")
    }

    @Test func theDescriptorIsReadFromTheChannelsDescription() throws {
        #expect(ConnectionSocket.descriptor(in: "SocketChannel { BaseSocket { fd=12 }, active = true }") == 12)
        #expect(ConnectionSocket.descriptor(in: "SocketChannel { BaseSocket { fd=0 } }") == 0)
        #expect(ConnectionSocket.descriptor(in: "SocketChannel { BaseSocket { fd= } }") == nil)
        #expect(ConnectionSocket.descriptor(in: "EmbeddedChannel") == nil)
        #expect(ConnectionSocket.descriptor(in: "fd=99999999999") == nil)
        // A channel without a socket has none.
        #expect(ConnectionSocket.of(EmbeddedChannel()) == nil)
    }

    /// A connected loopback pair: the accepted end and the connecting one (`receiveBuffer` on the latter).
    private static func connectedPair(receiveBuffer: Int32) throws -> (server: Int32, client: Int32) {
        let (listener, port) = try LoopbackSocket.listen()
        defer { close(listener) }
        let client = try LoopbackSocket.connect(port: port, receiveBuffer: receiveBuffer)
        let server = accept(listener, nil, nil)
        guard server >= 0 else {
            close(client)
            throw RawHTTP.SocketError()
        }
        return (server, client)
    }
}
