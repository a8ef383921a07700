import Foundation
import HLSProxy
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A real HTTP origin on 127.0.0.1 (port chosen by the OS) serving files from a directory, with a request log,
/// per-path fault injection (``Fault``) and, when made with `routedFaults`, paths that misbehave by their name
/// (``TestOriginRoutes``: `/bytes/N`, `/reset`, `/redirect/K`, …). The one test origin of every test target.
package final class TestOrigin: Sendable {
    package enum Fault: Sendable {
        /// Answer with this status and a short body.
        case status(Int)
        /// Answer `status` for the first `times` requests, then normally.
        case failFirst(times: Int, status: Int)
        /// Answer 429 with `Retry-After: seconds` for the first `times` requests, then normally.
        case busyFirst(times: Int, seconds: Int)
        /// Close the connection without answering.
        case reset
        /// Send the head with the full Content-Length, then only `bytes` bytes, then close.
        case truncate(bytes: Int)
        /// Send the body in `chunk`-byte pieces with `delay` between them.
        case slow(chunk: Int, delay: TimeAmount)
        /// Wait `delay` before sending anything.
        case stall(delay: TimeAmount)
        /// Send nothing until ``TestOrigin/releasePattern(_:)`` names the path, then answer normally.
        case held
        /// Require this header (name, value) or answer 403.
        case requireHeader(String, String)
        /// Declare this Content-Length but send the whole body, then close (a lying origin: longer or shorter).
        case wrongLength(declared: Int)
        /// Send the head and `bytes` bytes of the body, then go silent (the connection stays open).
        case stallAfter(bytes: Int)
        /// Answer `302 Found` with this Location (relative or absolute).
        case redirect(to: String)
        /// Send no Content-Length: the body goes chunked, in pieces of `chunk` bytes.
        case noLength(chunk: Int)
        /// Send the whole body with `Content-Encoding: NAME`, whatever the request accepts (as S3 sends objects
        /// stored gzipped): gzip-compressed for `gzip`, as it is for any other name.
        case encoded(String)
        /// Serve `length` bytes of ``TestPattern`` (nil: a never-ending body without Content-Length) as `video/mp2t`,
        /// honouring Range, written only as fast as the client takes them; no file needed. With `holdAt`, sending
        /// stops at that offset until ``TestOrigin/releasePattern(_:)``.
        case pattern(length: Int64?, holdAt: Int64? = nil)
    }

    package struct LoggedRequest: Sendable {
        package var method: String
        package var path: String
        package var headers: [(String, String)]
        package var time: ContinuousClock.Instant
    }

    package let root: URL
    private let channel: NIOLockedValueBox<(any Channel)?> = NIOLockedValueBox(nil)
    /// Accepted connections, closed by `stop()` so that a stopped origin is really gone (pooled keep-alive
    /// connections would otherwise keep answering).
    private let connections = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
    private let boundPort = NIOLockedValueBox(0)
    private let faults = NIOLockedValueBox<[String: Fault]>([:])
    private let counters = NIOLockedValueBox<[String: Int]>([:])
    /// Requests by path (without the query).
    private let hitCounts = NIOLockedValueBox<[String: Int]>([:])
    /// Answers the paths of ``TestOriginRoutes`` by their names before anything else.
    private let routedFaults: Bool
    private let log = NIOLockedValueBox<[LoggedRequest]>([])
    /// A CDN's token cookie: the response to `path` sets `cookie` (`name=value`), and every other request without
    /// it in its `Cookie` header is refused with 403 (Akamai's `hdntl`, signed CloudFront cookies).
    package let cookieGate = NIOLockedValueBox<(path: String, cookie: String)?>(nil)
    /// `ETag` values sent with 200 and 206 answers, by path.
    private let etags = NIOLockedValueBox<[String: String]>([:])
    /// Body bytes of ``Fault/pattern(length:holdAt:)`` answers written to clients, by path.
    private let patternSent = NIOLockedValueBox<[String: Int64]>([:])
    /// Pattern answers that ended because the client went away, by path.
    private let patternAbandoned = NIOLockedValueBox<[String: Int]>([:])
    /// Held pattern answers waiting for ``releasePattern(_:)``, by path.
    private let patternHeld = NIOLockedValueBox<[String: [@Sendable () -> Void]]>([:])
    private let patternReleased = NIOLockedValueBox<Set<String>>([])
    /// Bytes to serve instead of a file, by path.
    private let overrides = NIOLockedValueBox<[String: (body: [UInt8], contentType: String)]>([:])

    /// Runs first on every accepted connection (an HTTPS origin adds its TLS handler here).
    private let channelSetup: (@Sendable (any Channel) throws -> Void)?
    /// Sets up HTTP on an accepted connection instead of NIO's HTTP/1.1 server pipeline (an HTTP/2 origin), given
    /// a maker of the handler that answers requests (`HTTPServerRequestPart` in, `HTTPServerResponsePart` out).
    private let httpSetup: (@Sendable (any Channel, @escaping @Sendable () -> any ChannelHandler) throws -> Void)?

    package init(
        root: URL, routedFaults: Bool = false, channelSetup: (@Sendable (any Channel) throws -> Void)? = nil,
        httpSetup: (@Sendable (any Channel, @escaping @Sendable () -> any ChannelHandler) throws -> Void)? = nil
    ) {
        self.root = root
        self.routedFaults = routedFaults
        self.channelSetup = channelSetup
        self.httpSetup = httpSetup
    }

    /// The bound port; still the same after `stop()`, so URLs made later name the dead origin.
    package var port: Int { boundPort.withLockedValue { $0 } }
    package var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Binds an OS-chosen port, or `port` (to bring a stopped origin back at the same address), on `group`.
    /// Starts on a free port below the ephemeral range (32768 and up on Linux), for an origin that is stopped and
    /// started again on the same port: a port of that range can be taken meanwhile by any outgoing connection of the
    /// tests running beside this one, and the restart then fails with EADDRINUSE.
    package func startBelowTheEphemeralRange() async throws {
        try await HLSTestSupport.startBelowTheEphemeralRange { try await start(port: $0) }
    }

    package func start(port: Int = 0, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws {
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                let id = ObjectIdentifier(channel)
                self.connections.withLockedValue { $0[id] = channel }
                channel.closeFuture.whenComplete { _ in _ = self.connections.withLockedValue { $0.removeValue(forKey: id) } }
                return channel.eventLoop.makeCompletedFuture {
                    try self.channelSetup?(channel)
                    if let httpSetup = self.httpSetup {
                        try httpSetup(channel) { TestOriginHandler(origin: self) }
                        return
                    }
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(TestOriginHandler(origin: self))
                }
            }
        let bound = try await bootstrap.bind(host: "127.0.0.1", port: port).get()
        channel.withLockedValue { $0 = bound }
        boundPort.withLockedValue { $0 = bound.localAddress?.port ?? 0 }
    }

    /// Closes the listener and every open connection.
    package func stop() async {
        let bound = channel.withLockedValue { $0 }
        try? await bound?.close()
        for connection in connections.withLockedValue({ Array($0.values) }) {
            try? await connection.close()
        }
    }

    package func setFault(_ fault: Fault?, for path: String) {
        faults.withLockedValue { $0[path] = fault }
    }

    /// Sends `etag` (as it is: strong `"x"` or weak `W/"x"`) with the answers for `path`.
    package func setETag(_ etag: String?, for path: String) {
        etags.withLockedValue { $0[path] = etag }
    }

    fileprivate func etag(for path: String) -> String? {
        etags.withLockedValue { $0[path] }
    }

    package func setBody(_ body: [UInt8]?, contentType: String = "application/vnd.apple.mpegurl", for path: String) {
        overrides.withLockedValue { $0[path] = body.map { ($0, contentType) } }
    }

    /// Body bytes of pattern answers for `path` written so far.
    package func patternBytesSent(_ path: String) -> Int64 { patternSent.withLockedValue { $0[path] ?? 0 } }

    /// Pattern answers for `path` that stopped because their client closed the connection.
    package func patternAbandonedCount(_ path: String) -> Int { patternAbandoned.withLockedValue { $0[path] ?? 0 } }

    /// Lets held pattern answers for `path` go on (and later ones not stop).
    package func releasePattern(_ path: String) {
        patternReleased.withLockedValue { _ = $0.insert(path) }
        let waiting = patternHeld.withLockedValue { $0.removeValue(forKey: path) ?? [] }
        for resume in waiting { resume() }
    }

    fileprivate func patternWrote(_ count: Int, path: String) {
        patternSent.withLockedValue { $0[path, default: 0] += Int64(count) }
    }

    fileprivate func patternStopped(path: String) {
        patternAbandoned.withLockedValue { $0[path, default: 0] += 1 }
    }

    /// Runs `resume` now when `path` was released, else when it is.
    fileprivate func whenPatternReleased(_ path: String, _ resume: @escaping @Sendable () -> Void) {
        let now = patternHeld.withLockedValue { held -> Bool in
            if patternReleased.withLockedValue({ $0.contains(path) }) { return true }
            held[path, default: []].append(resume)
            return false
        }
        if now { resume() }
    }

    package var requests: [LoggedRequest] { log.withLockedValue { $0 } }
    package func requests(matching suffix: String) -> [LoggedRequest] { requests.filter { $0.path.hasSuffix(suffix) } }
    package func requests(containing text: String) -> [LoggedRequest] { requests.filter { $0.path.contains(text) } }
    package func clearLog() { log.withLockedValue { $0.removeAll() } }

    /// Requests for `path` (without the query) so far.
    package func hits(_ path: String) -> Int { hitCounts.withLockedValue { $0[path] ?? 0 } }

    /// Records a request; returns how many times its path was asked for, this one included.
    fileprivate func record(_ head: HTTPRequestHead, path: String) -> Int {
        log.withLockedValue {
            $0.append(
                LoggedRequest(method: head.method.rawValue, path: head.uri, headers: head.headers.map { ($0.name, $0.value) }, time: .now))
        }
        return hitCounts.withLockedValue { counts in
            counts[path, default: 0] += 1
            return counts[path]!
        }
    }

    fileprivate var answersRoutes: Bool { routedFaults }

    fileprivate func fault(for path: String) -> Fault? {
        guard let fault = faults.withLockedValue({ $0[path] }) else { return nil }
        if case .failFirst(let times, _) = fault {
            let seen = counters.withLockedValue { counters -> Int in
                counters[path, default: 0] += 1
                return counters[path]!
            }
            return seen <= times ? fault : nil
        }
        if case .busyFirst(let times, _) = fault {
            let seen = counters.withLockedValue { counters -> Int in
                counters[path, default: 0] += 1
                return counters[path]!
            }
            return seen <= times ? fault : nil
        }
        return fault
    }

    fileprivate func content(for path: String) -> (body: [UInt8], contentType: String)? {
        if let override = overrides.withLockedValue({ $0[path] }) { return override }
        let relative = path.split(separator: "?", maxSplits: 1)[0].removingPercentEncoding ?? ""
        guard !relative.contains("..") else { return nil }
        let file = root.appendingPathComponent(String(relative.dropFirst()))
        guard let data = FileManager.default.contents(atPath: file.path) else { return nil }
        let type: String
        switch file.pathExtension {
        case "m3u8": type = "application/vnd.apple.mpegurl"
        case "ts": type = "video/mp2t"
        case "mp4", "m4s": type = "video/mp4"
        case "key": type = "application/octet-stream"
        default: type = "application/octet-stream"
        }
        return ([UInt8](data), type)
    }
}

private final class TestOriginHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    let origin: TestOrigin
    private var head: HTTPRequestHead?

    init(origin: TestOrigin) {
        self.origin = origin
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): self.head = head
        case .body: break
        case .end:
            guard let head else { return }
            respond(context: context, head: head)
        }
    }

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead) {
        let path = String(head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        let hit = origin.record(head, path: path)
        if origin.answersRoutes, TestOriginRoutes.respond(context: context, request: head, path: path, hit: hit) { return }
        let fault = origin.fault(for: path)
        if let gate = origin.cookieGate.withLockedValue({ $0 }), gate.path != path {
            let sent = head.headers["Cookie"].flatMap { $0.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) } }
            guard sent.contains(gate.cookie) else {
                send(context, status: 403, body: Array("no token cookie\n".utf8), type: "text/plain", head: head)
                return
            }
        }
        switch fault {
        case .busyFirst(_, let seconds):
            var headers = HTTPHeaders()
            headers.add(name: "Retry-After", value: "\(seconds)")
            headers.add(name: "Content-Length", value: "0")
            context.write(
                NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .tooManyRequests, headers: headers))),
                promise: nil)
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            return
        case .status(let code), .failFirst(_, let code):
            send(context, status: code, body: Array("fault \(code)\n".utf8), type: "text/plain", head: head)
            return
        case .reset:
            context.close(promise: nil)
            return
        case .held:
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            let loop = context.eventLoop
            origin.whenPatternReleased(path) { loop.execute { self.serve(context: bound.value, head: head, path: path, fault: nil) } }
            return
        case .stall(let delay):
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: delay) { self.serve(context: bound.value, head: head, path: path, fault: nil) }
            return
        case .redirect(let location):
            var headers = HTTPHeaders()
            headers.add(name: "Location", value: location)
            if let gate = origin.cookieGate.withLockedValue({ $0 }), gate.path == path {
                headers.add(name: "Set-Cookie", value: "\(gate.cookie); Path=/; HttpOnly")
            }
            headers.add(name: "Content-Length", value: "0")
            context.write(
                NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .found, headers: headers))), promise: nil)
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            return
        case .pattern(let length, let holdAt):
            servePattern(context: context, head: head, path: path, length: length, holdAt: holdAt)
            return
        case .requireHeader(let name, let value):
            if head.headers.first(name: name) != value {
                send(context, status: 403, body: Array("missing header\n".utf8), type: "text/plain", head: head)
                return
            }
        default: break
        }
        serve(context: context, head: head, path: path, fault: fault)
    }

    private func serve(context: ChannelHandlerContext, head: HTTPRequestHead, path: String, fault: TestOrigin.Fault?) {
        guard let (body, type) = origin.content(for: head.uri) ?? origin.content(for: path) else {
            send(context, status: 404, body: Array("not found\n".utf8), type: "text/plain", head: head)
            return
        }
        var status = 200
        var slice = body[...]
        var headers = HTTPHeaders()
        if case .encoded(let coding) = fault {
            slice = (coding == "gzip" ? Gzip.compress(body) : body)[...]
            headers.add(name: "Content-Encoding", value: coding)
            headers.add(name: "Vary", value: "Accept-Encoding")
        } else if let range = head.headers.first(name: "Range"), range.hasPrefix("bytes=") {
            var spec = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
            // A suffix range (the last N bytes).
            if spec.count == 2, spec[0].isEmpty, let suffix = Int(spec[1]), suffix > 0 {
                spec = [Substring(String(max(0, body.count - suffix))), ""]
            }
            if spec.count == 2, let first = Int(spec[0]), first < body.count {
                let last = min(Int(spec[1]) ?? body.count - 1, body.count - 1)
                slice = body[first...last]
                status = 206
                headers.add(name: "Content-Range", value: "bytes \(first)-\(last)/\(body.count)")
            } else {
                send(context, status: 416, body: [], type: "text/plain", head: head)
                return
            }
        }
        headers.add(name: "Content-Type", value: type)
        if let etag = origin.etag(for: path) { headers.add(name: "ETag", value: etag) }
        if let gate = origin.cookieGate.withLockedValue({ $0 }), gate.path == path {
            headers.add(name: "Set-Cookie", value: "\(gate.cookie); Path=/; HttpOnly")
        }
        if case .wrongLength(let declared) = fault {
            headers.add(name: "Content-Length", value: String(declared))
        } else if case .noLength = fault {
            // NIO's encoder chunks a body of unknown length.
        } else {
            headers.add(name: "Content-Length", value: String(slice.count))
        }
        context.write(
            NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))),
            promise: nil)
        if head.method == .HEAD {
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            return
        }
        switch fault {
        case .truncate(let bytes):
            let part = ByteBuffer(bytes: slice.prefix(bytes))
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.byteBuffer(part)))).whenComplete { _ in
                bound.value.close(promise: nil)
            }
        case .wrongLength:
            let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: slice))))).whenComplete { _ in
                bound.value.close(promise: nil)
            }
        case .stallAfter(let bytes):
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: slice.prefix(bytes))))), promise: nil)
        case .slow(let chunk, let delay):
            sendSlowly(context, bytes: Array(slice), chunk: chunk, delay: delay)
        case .noLength(let chunk):
            var rest = slice
            while !rest.isEmpty {
                context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: rest.prefix(chunk))))), promise: nil)
                rest = rest.dropFirst(chunk)
            }
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
        default:
            context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: slice)))), promise: nil)
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
        }
    }

    private func servePattern(context: ChannelHandlerContext, head: HTTPRequestHead, path: String, length: Int64?, holdAt: Int64?) {
        var status = HTTPResponseStatus.ok
        var start: Int64 = 0
        var end = length
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "video/mp2t")
        if let etag = origin.etag(for: path) { headers.add(name: "ETag", value: etag) }
        if let length, let range = head.headers.first(name: "Range"), range.hasPrefix("bytes=") {
            var spec = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
            // A suffix range (the last N bytes).
            if spec.count == 2, spec[0].isEmpty, let suffix = Int64(spec[1]), suffix > 0 {
                spec = [Substring(String(max(0, length - suffix))), ""]
            }
            guard spec.count == 2, let first = Int64(spec[0]), first < length else {
                send(context, status: 416, body: [], type: "text/plain", head: head)
                return
            }
            let last = min(Int64(spec[1]) ?? length - 1, length - 1)
            status = .partialContent
            start = first
            end = last + 1
            headers.add(name: "Content-Range", value: "bytes \(first)-\(last)/\(length)")
        }
        if let end { headers.add(name: "Content-Length", value: String(end - start)) }
        context.write(
            NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: status, headers: headers))), promise: nil)
        if head.method == .HEAD {
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            return
        }
        writePattern(NIOLoopBound(context, eventLoop: context.eventLoop), path: path, offset: start, end: end, holdAt: holdAt)
    }

    /// One piece at a time, the next when the previous was written: paced by the client.
    private func writePattern(_ context: NIOLoopBound<ChannelHandlerContext>, path: String, offset: Int64, end: Int64?, holdAt: Int64?) {
        if let end, offset >= end {
            context.value.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            return
        }
        if let holdAt, offset >= holdAt {
            let eventLoop = context.value.eventLoop
            origin.whenPatternReleased(path) {
                eventLoop.execute { self.writePattern(context, path: path, offset: offset, end: end, holdAt: nil) }
            }
            return
        }
        let count = Int(min(64 << 10, (end ?? Int64.max) - offset, (holdAt ?? Int64.max) - offset))
        let piece = TestPattern.bytes(at: offset, count: count)
        context.value.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.byteBuffer(piece)))).whenComplete { result in
            switch result {
            case .success:
                self.origin.patternWrote(count, path: path)
                // A new task, so a write that completes at once does not deepen the stack.
                context.value.eventLoop.execute {
                    self.writePattern(context, path: path, offset: offset + Int64(count), end: end, holdAt: holdAt)
                }
            case .failure:
                self.origin.patternStopped(path: path)
            }
        }
    }

    private func sendSlowly(_ context: ChannelHandlerContext, bytes: [UInt8], chunk: Int, delay: TimeAmount) {
        guard !bytes.isEmpty else {
            context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
            return
        }
        let piece = ByteBuffer(bytes: bytes.prefix(chunk))
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.byteBuffer(piece))), promise: nil)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: delay) {
            self.sendSlowly(bound.value, bytes: Array(bytes.dropFirst(chunk)), chunk: chunk, delay: delay)
        }
    }

    private func send(_ context: ChannelHandlerContext, status: Int, body: [UInt8], type: String, head: HTTPRequestHead) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Content-Length", value: String(body.count))
        context.write(
            NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers))),
            promise: nil)
        if head.method != .HEAD { context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil) }
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)), promise: nil)
    }
}

/// A deterministic body of any length, generated as it is sent, for objects too large to keep as arrays in a test:
/// byte `i` is `table[i % period]`, with a period that no chunk or window size divides.
package enum TestPattern {
    package static let period = 1_000_003
    package static let table: [UInt8] = {
        var state: UInt32 = 0x9E37_79B9
        return (0..<period).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
    }()

    package static func bytes(at offset: Int64, count: Int) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.reserveCapacity(count)
        var position = Int(offset % Int64(period))
        var left = count
        while left > 0 {
            let run = min(left, period - position)
            buffer.writeBytes(table[position..<position + run])
            left -= run
            position = 0
        }
        return buffer
    }

    /// Whether `bytes` are the pattern's bytes from `offset`.
    package static func matches(_ bytes: UnsafeRawBufferPointer, at offset: Int64) -> Bool {
        var position = Int(offset % Int64(period))
        var done = 0
        while done < bytes.count {
            let run = min(bytes.count - done, period - position)
            let same = table.withUnsafeBytes { memcmp($0.baseAddress! + position, bytes.baseAddress! + done, run) == 0 }
            guard same else { return false }
            done += run
            position = 0
        }
        return true
    }
}
