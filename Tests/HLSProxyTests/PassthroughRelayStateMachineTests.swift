import HLSCacheCore
import HLSOrigin
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSProxy

/// The decisions of a `Range` miss relayed to its client, without a channel or an origin.
@Suite struct PassthroughRelayStateMachineTests {
    typealias Machine = PassthroughRelayStateMachine

    static func machine(path: String = "/v/seg1.ts", keys: Bool = true) throws -> (Machine, OriginURL) {
        let url = try OriginURL("http://origin.test\(path)")
        return (Machine(url: url, mayReceiveKeySized: keys), url)
    }

    static func head(_ status: Int, url: OriginURL, _ headers: [(String, String)]) -> OriginResponseHead {
        OriginResponseHead(status: status, headers: HTTPHeaders(headers), url: url)
    }

    static func bytes(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }

    @Test func mediaIsRelayedWithItsHeadThenEnded() throws {
        var (machine, url) = try Self.machine()
        let effects = machine.receivedHead(
            Self.head(
                206, url: url,
                [("Content-Type", "video/mp2t"), ("Content-Range", "bytes 10-19/100"), ("Content-Length", "10"), ("Set-Cookie", "a=b")]))
        guard case .sendHead(let status, let headers) = try #require(effects.first), effects.count == 1 else {
            Issue.record("expected one head, got \(effects)")
            return
        }
        #expect(status == .partialContent)
        #expect(headers.first(name: "Content-Range") == "bytes 10-19/100")
        #expect(headers.first(name: "Content-Length") == "10")
        #expect(headers.first(name: "X-Cache") == "MISS")
        #expect(!headers.contains(name: "Set-Cookie"), "only the headers a range answer needs")
        #expect(!headers.contains(name: "Transfer-Encoding"))
        #expect(machine.receivedBody(Self.bytes("0123456789")) == [.write(Self.bytes("0123456789"))])
        #expect(machine.finished(.success(())) == [.end])
        #expect(machine.receivedBody(Self.bytes("x")) == [.stopReading], "after the end nothing more is relayed")
    }

    @Test func aBodyWithoutALengthGoesChunkedAndAFailureAfterTheHeadAborts() throws {
        var (machine, url) = try Self.machine()
        let effects = machine.receivedHead(
            Self.head(206, url: url, [("Content-Type", "video/mp2t"), ("Content-Range", "bytes 10-19/100")]))
        guard case .sendHead(_, let headers) = try #require(effects.first) else { throw Failure("no head: \(effects)") }
        #expect(headers.first(name: "Transfer-Encoding") == "chunked")
        #expect(machine.finished(.failure(.truncated)) == [.abort(.truncated)])
    }

    @Test func aPlaylistIsHandedOverAndItsBodyNotRead() throws {
        var (machine, url) = try Self.machine(path: "/v/index.m3u8")
        #expect(machine.receivedHead(Self.head(206, url: url, [("Content-Type", "application/vnd.apple.mpegurl")])) == [.handOverPlaylist])
        #expect(machine.receivedBody(Self.bytes("#EXTM3U\n")) == [.stopReading])
        #expect(machine.finished(.failure(.cancelled)) == [], "the playlist path answers the client")
    }

    @Test func anOpenAnswerIsHeldUntilItsFirstBytesTell() throws {
        // A playlist behind a generic type: handed over once "#EXTM3U" arrived, across two chunks.
        var (machine, url) = try Self.machine(path: "/live/manifest")
        #expect(machine.receivedHead(Self.head(200, url: url, [("Content-Type", "application/octet-stream")])) == [])
        #expect(machine.receivedBody(Self.bytes("#EXT")) == [])
        #expect(machine.receivedBody(Self.bytes("M3U\n#EXT-X-VERSION:3\n")) == [.handOverPlaylist, .stopReading])

        // Media behind the same head: the head goes out, then every chunk held, in order.
        var (media, mediaURL) = try Self.machine(path: "/live/manifest")
        _ = media.receivedHead(Self.head(200, url: mediaURL, [("Content-Type", "application/octet-stream"), ("Content-Length", "8")]))
        let bom = ByteBuffer(bytes: [0xEF])
        #expect(media.receivedBody(bom) == [], "a byte-order mark tells nothing yet")
        let effects = media.receivedBody(ByteBuffer(bytes: [0xBB, 0xBF, 0x47, 1, 2, 3, 4]))
        #expect(effects.count == 3)
        guard case .sendHead(let status, let headers) = effects.first else { throw Failure("no head: \(effects)") }
        #expect(status == .ok)
        #expect(headers.first(name: "Content-Type") == "application/octet-stream")
        #expect(Array(effects.dropFirst()) == [.write(bom), .write(ByteBuffer(bytes: [0xBB, 0xBF, 0x47, 1, 2, 3, 4]))])
        #expect(media.receivedBody(Self.bytes("more")) == [.write(Self.bytes("more"))])
    }

    @Test func aBodyTooShortToTellIsDecidedAtItsEnd() throws {
        var (playlist, url) = try Self.machine(path: "/live/manifest")
        _ = playlist.receivedHead(Self.head(200, url: url, [("Content-Type", "text/plain")]))
        #expect(playlist.receivedBody(Self.bytes("#EXTM3U")) == [])
        #expect(playlist.finished(.success(())) == [.handOverPlaylist], "a complete body of just the tag is a playlist")

        var (empty, emptyURL) = try Self.machine(path: "/live/manifest")
        _ = empty.receivedHead(Self.head(200, url: emptyURL, [("Content-Type", "text/plain")]))
        let effects = empty.finished(.success(()))
        guard effects.count == 2, case .sendHead = effects[0] else { throw Failure("expected a head and the end: \(effects)") }
        #expect(effects[1] == .end)

        var (failed, failedURL) = try Self.machine(path: "/live/manifest")
        _ = failed.receivedHead(Self.head(200, url: failedURL, [("Content-Type", "text/plain")]))
        _ = failed.receivedBody(Self.bytes("#EX"))
        #expect(failed.finished(.failure(.truncated)) == [.fail(.truncated)], "nothing was sent: the client gets the error")
    }

    @Test func anErrorStatusIsAnsweredAndTheBodyNotRead() throws {
        var (machine, url) = try Self.machine()
        let effects = machine.receivedHead(Self.head(503, url: url, [("Retry-After", "7")]))
        #expect(effects == [.answerOriginError(ProxyError.originStatus(503, host: "origin.test", retryAfter: .seconds(7)))])
        #expect(machine.receivedBody(Self.bytes("busy")) == [.stopReading])
        #expect(machine.finished(.success(())) == [])
        for status in [200, 206, 416] {
            var (passed, passedURL) = try Self.machine()
            guard case .sendHead = passed.receivedHead(Self.head(status, url: passedURL, [("Content-Type", "video/mp2t")])).first else {
                throw Failure("\(status) is passed on")
            }
        }
    }

    @Test func aKeySizedPartGoesOnlyToClientsAllowedKeys() throws {
        // From byte 0 with a generic type the head is held until the first bytes tell (not a playlist here).
        let range = [("Content-Type", "application/octet-stream"), ("Content-Range", "bytes 0-15/16"), ("Content-Length", "16")]
        let key = Self.bytes("0123456789abcdef")
        var (refused, url) = try Self.machine(path: "/k/key.bin", keys: false)
        #expect(refused.receivedHead(Self.head(206, url: url, range)) == [])
        #expect(refused.receivedBody(key) == [.refuse(KeySizedBody.refusal), .stopReading])
        #expect(refused.finished(.success(())) == [])

        var (allowed, allowedURL) = try Self.machine(path: "/k/key.bin", keys: true)
        _ = allowed.receivedHead(Self.head(206, url: allowedURL, range))
        let effects = allowed.receivedBody(key)
        guard effects.count == 2, case .sendHead = effects[0] else { throw Failure("allowed: \(effects)") }
        #expect(effects[1] == .write(key))

        var (part, partURL) = try Self.machine(path: "/k/seg.bin", keys: false)
        let larger = [("Content-Type", "application/octet-stream"), ("Content-Range", "bytes 0-15/4096"), ("Content-Length", "16")]
        _ = part.receivedHead(Self.head(206, url: partURL, larger))
        guard case .sendHead = part.receivedBody(key).first else { throw Failure("16 bytes of a larger object are not a key") }
    }

    @Test func aFailureBeforeTheHeadIsAnswered() throws {
        var (machine, _) = try Self.machine()
        #expect(machine.finished(.failure(.cancelled)) == [.fail(.cancelled)])
        #expect(machine.finished(.failure(.cancelled)) == [], "once")
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
