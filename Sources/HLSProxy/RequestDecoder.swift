import NIOCore
import NIOHTTP1

/// NIO's `HTTPRequestDecoder`, made to keep decoding after a request that asks for a protocol upgrade.
///
/// llhttp marks a request with an `Upgrade` field and the `upgrade` connection option (`curl --http2` on an
/// `http://` URL sends `Upgrade: h2c` with every request; browsers send `Upgrade: websocket`) as the last HTTP
/// bytes on the connection, and NIO's decoder then stops parsing for good (`stopParsing`), expecting an
/// `HTTPServerUpgradeHandler` to take the connection over: every later request on it stayed unread until a
/// timeout closed it. hlscache upgrades to nothing — RFC 9110 §7.8 lets a server ignore `Upgrade`, and answers
/// such requests as ordinary ones — so when such a request has ended and the decoder produced nothing after it,
/// the decoder is replaced by a fresh one that reads the bytes after it as the next request.
///
/// ``ProxyHTTPHandler`` tells it when such a request ended (``upgradeRequestEnded``) and when any other part
/// arrived after it (the decoder did not stop after all). Both run on the connection's event loop.
final class RequestDecoder: ByteToMessageDecoder {
    typealias InboundOut = HTTPServerRequestPart

    private var decoder = HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)
    /// The `.end` of a request that stops NIO's decoder was just handed on, and nothing since.
    var upgradeRequestEnded = false

    /// Whether llhttp takes `head` for a protocol upgrade (its `upgrade` flag, which stops NIO's decoder): an
    /// `Upgrade` field together with an `upgrade` option in `Connection` or `Proxy-Connection`. (`CONNECT` stops it
    /// too, but what follows a `CONNECT` is not HTTP: that connection is closed after its answer.)
    /// `HTTPConformanceTests` checks this against the decoder itself.
    static func isUpgradeRequest(_ head: HTTPRequestHead) -> Bool {
        guard head.headers.contains(name: "upgrade") else { return false }
        for name in ["connection", "proxy-connection"] {
            for value in head.headers[name] where value.split(separator: ",").contains(where: { $0.trimmingSpaces().lowercased() == "upgrade" }) {
                return true
            }
        }
        return false
    }

    func decoderAdded(context: ChannelHandlerContext) {
        decoder.decoderAdded(context: context)
    }

    func decoderRemoved(context: ChannelHandlerContext) {
        decoder.decoderRemoved(context: context)
    }

    func decode(context: ChannelHandlerContext, buffer: inout ByteBuffer) throws -> DecodingState {
        let state = try decoder.decode(context: context, buffer: &buffer)
        guard upgradeRequestEnded else { return state }
        // The decoder stopped after the request (anything it decoded since would have cleared the flag): the bytes
        // left are the next request, for a fresh decoder.
        upgradeRequestEnded = false
        decoder.decoderRemoved(context: context)
        decoder = HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)
        decoder.decoderAdded(context: context)
        return buffer.readableBytes > 0 ? .continue : .needMoreData
    }

    func decodeLast(context: ChannelHandlerContext, buffer: inout ByteBuffer, seenEOF: Bool) throws -> DecodingState {
        try decoder.decodeLast(context: context, buffer: &buffer, seenEOF: seenEOF)
    }
}
