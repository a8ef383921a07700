import Foundation
import HLSCacheCore
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Paths of a ``TestOrigin`` made with `routedFaults` that misbehave by their name, for the origin client's tests
/// (no files, no per-path setup):
///
/// - `/bytes/N`: N bytes of ``TestOrigin/pattern(_:)`` with Content-Length; `/chunked/N` the same without it.
/// - `/notfound`: 404. `/flaky/N/ID`: 503 for the first N hits, then 200 `ok`. `/busy/N/SECONDS`: 503 with
///   `Retry-After: SECONDS` for the first N hits, then 200.
/// - `/reset`: the connection is reset (SO_LINGER 0) before any response. `/truncated`: Content-Length 1000, 100
///   bytes, close.
/// - `/slow`: Content-Length 1000, 10 bytes, then silence. `/silent`: no response at all.
/// - `/redirect/K`: a chain of K relative 302s ending in 200 `done`. `/loop`: 302 to itself.
/// - `/metadata`: 302 to the cloud metadata address. `/echo`: the request headers as `name: value` lines.
/// - `/coded/CODING/COUNT[/cut]`: COUNT ``TestOrigin/textBytes(_:)`` in CODING (gzip, zlib, raw, br), whatever the
///   request accepts; `cut` drops the last 10 coded bytes.
/// - `/cookie/set`, `/cookie/redirect`, `/cookie/hop`, `/cookie/need`: a cookie `token=abc` set and required.
/// - `/range`: 10 000 pattern bytes, honouring `Range: bytes=a-b` with 206.
///
/// Other paths are served as by any ``TestOrigin`` (files, bodies set, faults set).
enum TestOriginRoutes {
    static let names: Set<String> = [
        "bytes", "chunked", "notfound", "flaky", "reset", "truncated", "slow", "silent", "redirect", "loop", "metadata", "coded",
        "busy", "cookie", "echo", "range",
    ]

    /// Answers `request` if its path is a route; `hit` is how many times the path was asked for, this time included.
    /// Returns false for other paths.
    static func respond(context: ChannelHandlerContext, request: HTTPRequestHead, path: String, hit: Int) -> Bool {
        let parts = path.split(separator: "/").map(String.init)
        guard let name = parts.first, names.contains(name) else { return false }
        switch name {
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
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer()))), promise: nil)
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
            let count = Int(parts[2])!
            let plain = TestOrigin.textBytes(count)
            var coded = parts[1] == "br" ? plain : TestZlib.compress(plain, format: TestZlib.Format(rawValue: parts[1])!)
            if parts.count > 3, parts[3] == "cut" { coded.removeLast(10) }
            let name = ["gzip": "gzip", "zlib": "deflate", "raw": "deflate", "br": "br"][parts[1]]!
            send(
                context, status: .ok, headers: ["Content-Encoding": name, "Content-Length": "\(coded.count)", "Vary": "Accept-Encoding"],
                body: coded)
        case "busy":
            let failures = Int(parts[1])!
            if hit <= failures {
                send(context, status: .serviceUnavailable, headers: ["Retry-After": parts[2]], body: Array("busy".utf8))
            } else {
                send(context, status: .ok, body: Array("ok".utf8))
            }
        case "cookie":
            // set: sets token=abc (and a cookie for another domain, which must be refused); redirect: sets it on a 302
            // to /cookie/need; hop: a 302 to /cookie/need setting nothing; need: 403 without it.
            switch parts.count > 1 ? parts[1] : "" {
            case "set":
                send(
                    context, status: .ok,
                    headers: ["Set-Cookie": "token=abc; Path=/cookie", "set-cookie": "stray=1; Domain=elsewhere.example"],
                    body: Array("set".utf8))
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
        default:  // "range"
            let total = 10_000
            if let range = request.headers.first(name: "Range"), range.hasPrefix("bytes=") {
                let bounds = range.dropFirst(6).split(separator: "-").compactMap { Int($0) }
                let lower = bounds[0]
                let upper = min(bounds.count > 1 ? bounds[1] : total - 1, total - 1)
                send(
                    context, status: .partialContent,
                    headers: ["Content-Range": "bytes \(lower)-\(upper)/\(total)", "Content-Length": "\(upper - lower + 1)"],
                    body: TestOrigin.patternBytes(lower..<(upper + 1)))
            } else {
                send(context, status: .ok, headers: ["Content-Length": "\(total)"], body: TestOrigin.patternBytes(0..<total))
            }
        }
        return true
    }

    private static func writeHead(_ context: ChannelHandlerContext, status: HTTPResponseStatus, headers: HTTPHeaders) {
        context.write(
            NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
    }

    private static func writeBody(_ context: ChannelHandlerContext, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + 8192, bytes.count)
            context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: bytes[offset..<end])))), promise: nil)
            offset = end
        }
    }

    private static func send(_ context: ChannelHandlerContext, status: HTTPResponseStatus, headers: HTTPHeaders = [:], body: [UInt8]) {
        var headers = headers
        if !headers.contains(name: "Content-Length") && !headers.contains(name: "Transfer-Encoding") {
            headers.add(name: "Content-Length", value: "\(body.count)")
        }
        writeHead(context, status: status, headers: headers)
        writeBody(context, body)
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
    }
}

extension TestOrigin {
    /// Byte `i` of every body the routes generate.
    package static func pattern(_ i: Int) -> UInt8 { UInt8(i % 251) }

    package static func patternBytes(_ range: Range<Int>) -> [UInt8] { range.map(pattern) }

    /// `count` bytes of lower-case letters from a fixed pseudo-random sequence: they compress about as well as
    /// text (1.6×), unlike ``patternBytes(_:)``, whose period of 251 compresses a thousandfold.
    package static func textBytes(_ count: Int) -> [UInt8] {
        var state: UInt32 = 2_463_534_242
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 17
            state ^= state << 5
            return 97 + UInt8(state % 26)
        }
    }

    /// A test origin with no files whose paths misbehave by their name (``TestOriginRoutes``), started on `group`.
    package static func routed(group: any EventLoopGroup) async throws -> TestOrigin {
        let origin = TestOrigin(root: URL(fileURLWithPath: "/nonexistent/hlscache-test-origin"), routedFaults: true)
        try await origin.start(group: group)
        return origin
    }

    /// `path` (with its query) on this origin.
    package func url(_ path: String) -> OriginURL {
        try! OriginURL("\(baseURL)\(path)")
    }
}
