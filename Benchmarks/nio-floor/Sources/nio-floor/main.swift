#if canImport(Glibc)
    import Glibc
#endif
import NIOCore
import NIOPosix

// nio-floor PORT BODY-FILE MODE: answers every request head (bytes up to CR LF CR LF) with the same 200 whose body is
// BODY-FILE's bytes, on as many event loops as cores. No parsing, no routing, no cache: what SwiftNIO itself costs per
// request. MODE says how the answer is written:
//   batched   one prebuilt buffer per request, flushed once per read batch (channelReadComplete)
//   flushed   one prebuilt buffer per request, writeAndFlush at once (what a server answering each request does)
//   promised  as flushed, with a promise and a callback on it (what hlscache does to learn that a response is written)
//   three     head, Date line and body as three writes, the last with a promise (hlscache before 2026-11-29)
let arguments = CommandLine.arguments
guard arguments.count == 4, let port = Int(arguments[1]) else {
    print("usage: nio-floor PORT BODY-FILE batched|flushed|promised|three")
    exit(2)
}
let mode = arguments[3]
/// The bytes of the file at `path` (no Foundation here).
func contents(of path: String) -> String {
    guard let file = fopen(path, "r") else {
        print("nio-floor: cannot read \(path)")
        exit(2)
    }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while case let count = fread(&chunk, 1, chunk.count, file), count > 0 { bytes += chunk[0..<count] }
    return String(decoding: bytes, as: UTF8.self)
}
let body = contents(of: arguments[2])
let headText =
    "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.apple.mpegurl\r\nContent-Length: \(body.utf8.count)\r\n"
    + "Accept-Ranges: bytes\r\nX-Cache: HIT\r\n"
let dateText = "Date: Sun, 29 Nov 2026 02:00:00 GMT\r\n\r\n"
let whole = ByteBuffer(string: headText + dateText + body)
let headBuffer = ByteBuffer(string: headText)
let dateBuffer = ByteBuffer(string: dateText)
let bodyBuffer = ByteBuffer(string: body)

final class Answer: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer
    private var tail: [UInt8] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = tail
        bytes.append(contentsOf: unwrapInboundIn(data).readableBytesView)
        var heads = 0
        var index = 0
        var consumed = 0
        while index + 3 < bytes.count {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 {
                heads += 1
                index += 4
                consumed = index
            } else {
                index += 1
            }
        }
        tail = Array(bytes[consumed...])
        for _ in 0..<heads { answer(context: context) }
    }

    private func answer(context: ChannelHandlerContext) {
        switch mode {
        case "batched":
            context.write(wrapOutboundOut(whole), promise: nil)
        case "flushed":
            context.writeAndFlush(wrapOutboundOut(whole), promise: nil)
        case "promised":
            let done = context.eventLoop.makePromise(of: Void.self)
            done.futureResult.whenComplete { _ in }
            context.writeAndFlush(wrapOutboundOut(whole), promise: done)
        default:
            context.write(wrapOutboundOut(headBuffer), promise: nil)
            context.write(wrapOutboundOut(dateBuffer), promise: nil)
            let done = context.eventLoop.makePromise(of: Void.self)
            done.futureResult.whenComplete { _ in }
            context.writeAndFlush(wrapOutboundOut(bodyBuffer), promise: done)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
    }
}

let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
let channel = try ServerBootstrap(group: group)
    .serverChannelOption(.backlog, value: 1024)
    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
    .childChannelOption(.tcpOption(.tcp_nodelay), value: 1)
    .childChannelOption(.maxMessagesPerRead, value: 4)
    .childChannelInitializer { channel in
        channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(Answer()) }
    }
    .bind(host: "127.0.0.1", port: port).wait()
print("nio-floor listening on 127.0.0.1:\(port) (\(mode))")
try channel.closeFuture.wait()
