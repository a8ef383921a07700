import Foundation
import HLSTestSupport
import NIOCore
import NIOEmbedded
import Testing

@testable import HLSProxy

/// A connection's objects hold each other strongly (a weak reference to the handler cost every retain of it the
/// runtime's slow path): they must all be freed once the connection is gone.
@Suite struct ConnectionLifetimeTests {
    /// The decoder and the handler, wired as the server wires them (the decoder replays through the handler, which
    /// answers through a responder that holds it), after requests were answered and the connection closed: nothing
    /// of them is left.
    @Test func aClosedConnectionsHandlerDecoderAndResponderAreFreed() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        defer { Task { await harness.shutdown() } }
        weak var weakHandler: ProxyHTTPHandler?
        weak var weakDecoder: RequestDecoder?
        do {
            let channel = EmbeddedChannel()
            let decoder = RequestDecoder()
            let handler = ProxyHTTPHandler(
                router: ProxyRouter(services: harness.server.services), configuration: harness.server.configuration, decoder: decoder)
            decoder.replayer = handler
            try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(decoder))
            try channel.pipeline.syncOperations.addHandler(handler)
            weakHandler = handler
            weakDecoder = decoder
            // Two requests answered at once (an unknown route), the second left in the middle of being read.
            try channel.writeInbound(ByteBuffer(string: "GET /nothing-here HTTP/1.1\r\nHost: x\r\n\r\nGET /neither HTTP/1.1\r\nHost"))
            var wire = ""
            while let part = try channel.readOutbound(as: IOData.self) {
                if case .byteBuffer(let buffer) = part { wire += String(buffer: buffer) }
            }
            #expect(wire.hasPrefix("HTTP/1.1 404"), "\(wire.prefix(80))")
            _ = try? channel.finish()
        }
        #expect(weakHandler == nil, "the handler outlived its connection")
        #expect(weakDecoder == nil, "the decoder outlived its connection")
    }
}
