import Foundation
import HLSCacheCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A small HTTP origin on 127.0.0.1 with an OS-chosen port, whose paths misbehave on purpose.
///
/// - `/bytes/N`: N bytes of `pattern` with Content-Length; `/chunked/N` the same without it.
/// - `/notfound`: 404. `/flaky/N/ID`: 503 for the first N hits, then 200 `ok`.
/// - `/reset`: the connection is reset before any response. `/truncated`: Content-Length 1000, 100 bytes, close.
/// - `/slow`: Content-Length 1000, 10 bytes, then silence. `/silent`: no response at all.
/// - `/redirect/K`: a chain of K relative 302s ending in 200 `done`. `/loop`: 302 to itself.
/// - `/metadata`: 302 to the cloud metadata address. `/echo`: the request headers as `name: value` lines.
/// - `/range`: 10 000 bytes of `pattern`, honouring `Range: bytes=a-b` with 206.
final class TestOrigin: Sendable {
    let port: Int
    private let channel: any Channel
    let state: State

    final class State: Sendable {
        private let hits = NIOLockedValueBox<[String: Int]>([:])
        private let children = NIOLockedValueBox<[any Channel]>([])

        func hit(_ path: String) -> Int {
            hits.withLockedValue { hits in
                hits[path, default: 0] += 1
                return hits[path]!
            }
        }

        func count(_ path: String) -> Int { hits.withLockedValue { $0[path] ?? 0 } }
        func add(_ channel: any Channel) { children.withLockedValue { $0.append(channel) } }
        func allChildren() -> [any Channel] { children.withLockedValue { $0 } }
    }

    /// Byte `i` of every generated body.
    static func pattern(_ i: Int) -> UInt8 { UInt8(i % 251) }

    static func patternBytes(_ range: Range<Int>) -> [UInt8] { range.map(pattern) }

    /// `count` bytes of lower-case letters from a fixed pseudo-random sequence: they compress about as well as
    /// text (1.6×), unlike ``patternBytes(_:)``, whose period of 251 compresses a thousandfold.
    static func textBytes(_ count: Int) -> [UInt8] {
        var state: UInt32 = 2_463_534_242
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            return 97 + UInt8(state % 26)
        }
    }

    private init(port: Int, channel: any Channel, state: State) {
        self.port = port
        self.channel = channel
        self.state = state
    }

    static func start(group: any EventLoopGroup) async throws -> TestOrigin {
        let state = State()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                state.add(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(TestOriginHandler(state: state))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return TestOrigin(port: channel.localAddress!.port!, channel: channel, state: state)
    }

    func url(_ path: String) -> OriginURL {
        try! OriginURL("http://127.0.0.1:\(port)\(path)")
    }

    func hits(_ path: String) -> Int { state.count(path) }

    func stop() async {
        try? await channel.close()
        for child in state.allChildren() { try? await child.close() }
    }
}

/// Serves one request at a time per connection according to its path.
final class TestOriginHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let state: TestOrigin.State
    private var head: HTTPRequestHead?

    init(state: TestOrigin.State) {
        self.state = state
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            if let head { respond(context: context, head: head) }
            head = nil
        }
    }

    private func respond(context: ChannelHandlerContext, head request: HTTPRequestHead) {
        let path = String(request.uri.split(separator: "?", maxSplits: 1).first ?? "")
        let hit = state.hit(path)
        let parts = path.split(separator: "/").map(String.init)
        switch parts.first ?? "" {
        case "bytes":
            let count = Int(parts[1])!
            send(context, status: .ok, headers: ["Content-Length": "\(count)"], body: TestOrigin.patternBytes(0..<count))
        case "chunked":
            let count = Int(parts[1])!
            send(context, status: .ok, headers: ["Transfer-Encoding": "chunked"], body: TestOrigin.patternBytes(0..<count))
        case "notfound":
            send(context, status: .notFound, body: Array("nope".utf8))
        case "flaky":
            let failures = Int(parts[1])!
            if hit <= failures {
                send(context, status: .serviceUnavailable, body: Array("try later".utf8))
            } else {
                send(context, status: .ok, body: Array("ok".utf8))
            }
        case "reset":
            // SO_LINGER 0 turns the close into a TCP reset.
            let channel = context.channel
            if let provider = channel as? any SocketOptionProvider {
                provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in channel.close(promise: nil) }
            } else {
                channel.close(promise: nil)
            }
        case "truncated":
            writeHead(context, status: .ok, headers: ["Content-Length": "1000"])
            writeBody(context, TestOrigin.patternBytes(0..<100))
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer()))), promise: nil)
            context.close(promise: nil)
        case "slow":
            writeHead(context, status: .ok, headers: ["Content-Length": "1000"])
            writeBody(context, TestOrigin.patternBytes(0..<10))
            context.flush()
        case "silent":
            break
        case "redirect":
            let remaining = Int(parts[1])!
            if remaining == 0 {
                send(context, status: .ok, body: Array("done".utf8))
            } else {
                send(context, status: .found, headers: ["Location": "\(remaining - 1)"], body: [])
            }
        case "loop":
            send(context, status: .found, headers: ["Location": "/loop"], body: [])
        case "metadata":
            send(context, status: .found, headers: ["Location": "http://169.254.169.254/latest/meta-data/"], body: [])
        case "coded":
            // /coded/CODING/COUNT[/cut]: COUNT text bytes in CODING (gzip, zlib, raw, br), whatever the request
            // accepts (as S3 sends objects stored gzipped); `cut` drops the last 10 coded bytes, `Content-Length`
            // still right for what is sent.
            let count = Int(parts[2])!
            let plain = TestOrigin.textBytes(count)
            var coded = parts[1] == "br" ? plain : TestZlib.compress(plain, format: TestZlib.Format(rawValue: parts[1])!)
            if parts.count > 3, parts[3] == "cut" { coded.removeLast(10) }
            let name = ["gzip": "gzip", "zlib": "deflate", "raw": "deflate", "br": "br"][parts[1]]!
            send(context, status: .ok, headers: ["Content-Encoding": name, "Content-Length": "\(coded.count)", "Vary": "Accept-Encoding"], body: coded)
        case "busy":
            // /busy/N/SECONDS: 503 with Retry-After: SECONDS for the first N requests, then 200.
            let failures = Int(parts[1])!
            if hit <= failures {
                send(context, status: .serviceUnavailable, headers: ["Retry-After": parts[2]], body: Array("busy".utf8))
            } else {
                send(context, status: .ok, body: Array("ok".utf8))
            }
        case "cookie":
            // /cookie/set: sets token=abc (and a cookie for another domain, which must be refused);
            // /cookie/redirect: sets it on a 302 to /cookie/need; /cookie/hop: a 302 to /cookie/need setting nothing;
            // /cookie/need: 403 without it.
            switch parts.count > 1 ? parts[1] : "" {
            case "set":
                send(context, status: .ok, headers: ["Set-Cookie": "token=abc; Path=/cookie", "set-cookie": "stray=1; Domain=elsewhere.example"], body: Array("set".utf8))
            case "redirect":
                send(context, status: .found, headers: ["Location": "/cookie/need", "Set-Cookie": "token=abc; Path=/"], body: [])
            case "hop":
                send(context, status: .found, headers: ["Location": "/cookie/need"], body: [])
            default:
                let cookies = request.headers["Cookie"].joined(separator: "; ")
                let ok = cookies.split(separator: ";").contains { $0.trimmingCharacters(in: .whitespaces) == "token=abc" }
                send(context, status: ok ? .ok : .forbidden, body: Array(cookies.utf8))
            }
        case "echo":
            let text = request.headers.map { "\($0.name.lowercased()): \($0.value)\n" }.joined()
            send(context, status: .ok, body: Array(text.utf8))
        case "range":
            let total = 10_000
            if let range = request.headers.first(name: "Range"), range.hasPrefix("bytes=") {
                let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
                let lower = bounds[0]
                let upper = min(bounds.count > 1 ? bounds[1] : total - 1, total - 1)
                send(
                    context, status: .partialContent,
                    headers: ["Content-Range": "bytes \(lower)-\(upper)/\(total)", "Content-Length": "\(upper - lower + 1)"],
                    body: TestOrigin.patternBytes(lower..<(upper + 1))
                )
            } else {
                send(context, status: .ok, headers: ["Content-Length": "\(total)"], body: TestOrigin.patternBytes(0..<total))
            }
        default:
            send(context, status: .notFound, body: [])
        }
    }

    private func writeHead(_ context: ChannelHandlerContext, status: HTTPResponseStatus, headers: HTTPHeaders) {
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
    }

    private func writeBody(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + 8192, bytes.count)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: bytes[offset..<end])))), promise: nil)
            offset = end
        }
    }

    private func send(_ context: ChannelHandlerContext, status: HTTPResponseStatus, headers: HTTPHeaders = [:], body: [UInt8]) {
        var headers = headers
        if !headers.contains(name: "Content-Length") && !headers.contains(name: "Transfer-Encoding") {
            headers.add(name: "Content-Length", value: "\(body.count)")
        }
        writeHead(context, status: status, headers: headers)
        writeBody(context, body)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
