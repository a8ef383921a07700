import HLSCacheCore
import HLSOrigin
import HLSTestSupport
import NIOCore
import Testing

/// Paths whose percent escapes do not decode to UTF-8 (`%E9` alone) go out on a raw exchange, since
/// AsyncHTTPClient would send `GET /` for them. The same behaviour is asked of it as of the pooled path: the request
/// line exactly as written, the same headers, streaming with backpressure, decoding, the timeouts, the failures.
@Suite("OriginClient: paths AsyncHTTPClient cannot send as written")
struct OriginRawExchangeTests {
    @Test func onlyPathsFoundationCannotDecodeTakeTheRawExchange() throws {
        #expect(needsRawExchange("http://127.0.0.1/caf%E9.ts"))
        #expect(needsRawExchange("http://127.0.0.1/x/%FF/y.ts?q=1"))
        #expect(!needsRawExchange("http://127.0.0.1/caf%C3%A9.ts"))
        #expect(!needsRawExchange("http://127.0.0.1/plain.ts?q=%FF"))
        #expect(!needsRawExchange("http://127.0.0.1/"))
    }

    @Test func theExactPathIsRequestedAndTheWholeBodyArrives() async throws {
        try await withOrigin { origin, client, group in
            let response = try await client.fetch(origin.url("/bytes/70000/caf%E9.ts"), maxBytes: 1 << 20)
            #expect(response.status == 200)
            #expect(response.head.contentLength == 70000)
            #expect(sameBytes(Array(response.body.readableBytesView), TestOrigin.patternBytes(0..<70000)))
            #expect(origin.hits("/bytes/70000/caf%E9.ts") == 1)
            #expect(origin.hits("/") == 0)
            let query = try await client.fetch(origin.url("/bytes/10/%FF.ts?t=%E9"), maxBytes: 1 << 20)
            #expect(query.body.readableBytes == 10)
            #expect(origin.hits("/bytes/10/%FF.ts") == 1)
            let head = await streamRecording(client, origin.url("/bytes/5000/%E9"), method: .HEAD, group: group)
            #expect(head.snapshot.heads.first?.contentLength == 5000)
            #expect(head.snapshot.body.isEmpty)
            #expect(head.error == nil)
        }
    }

    @Test func theSameHeadersAreSent() async throws {
        try await withOrigin { configuration in
            configuration.originHeaders["127.0.0.1"] = [(name: "X-Origin-Token", value: "abc")]
        } _: { origin, client, _ in
            let response = try await client.fetch(origin.url("/echo/%E9"), headers: [("Range", "bytes=0-1")], maxBytes: 1 << 16)
            let text = String(buffer: response.body)
            #expect(text.contains("host: 127.0.0.1:\(origin.port)\n"), "\(text)")
            #expect(text.contains("x-origin-token: abc\n"), "\(text)")
            #expect(text.contains("range: bytes=0-1\n"), "\(text)")
            #expect(text.contains("accept-encoding: identity\n"), "\(text)")
            #expect(text.contains("via: 1.1 \(client.instanceToken)\n"), "\(text)")
            #expect(text.contains("user-agent: hlscache/"), "\(text)")
        }
    }

    @Test func backpressureDeliversEveryByteInOrder() async throws {
        try await withOrigin { origin, client, group in
            let size = 2 << 20
            let handler = await streamRecording(client, origin.url("/bytes/\(size)/%E9"), group: group, delay: .milliseconds(1))
            let record = handler.snapshot
            #expect(handler.error == nil)
            #expect(sameBytes(record.body, TestOrigin.patternBytes(0..<size)))
            #expect(record.chunks > 1)
            #expect(record.overlapping == 0, "a chunk arrived before the previous chunk's future completed")
            #expect(record.finishes.count == 1)
        }
    }

    @Test func chunkedAndCompressedBodiesAreDecoded() async throws {
        try await withOrigin { origin, client, _ in
            let chunked = try await client.fetch(origin.url("/chunked/50000/%E9"), maxBytes: 1 << 20)
            #expect(chunked.body.readableBytes == 50000)
            let coded = try await client.fetch(origin.url("/coded/gzip/300000/%E9"), maxBytes: 1 << 20)
            #expect(Array(coded.body.readableBytesView) == TestOrigin.textBytes(300000))
            #expect(coded.head.headers["Content-Encoding"].isEmpty)
            await #expect(throws: OriginError.truncated) {
                try await client.fetch(origin.url("/coded/gzip/300000/cut/%E9"), maxBytes: 1 << 20)
            }
        }
    }

    @Test func failuresAreReportedAsOnThePooledPath() async throws {
        // Timeouts: a read timeout short enough to wait for, long enough that a loaded machine still delivers the
        // ten bytes `/slow` sends before its silence.
        try await withOrigin { configuration in
            configuration.readTimeout = .seconds(2)
        } _: { origin, client, group in
            let stalled = await streamRecording(client, origin.url("/slow/%E9"), group: group)
            #expect(stalled.snapshot.body.count == 10)
            #expect(stalled.error == .timeout)
            await #expect(throws: OriginError.timeout) { try await client.fetch(origin.url("/silent/%E9"), maxBytes: 1024) }
        }
        // The other failures, with the default read timeout: a loaded machine must not turn them into timeouts.
        try await withOrigin { origin, client, group in
            let truncated = await streamRecording(client, origin.url("/truncated/%E9"), group: group)
            #expect(truncated.error == .truncated)
            #expect(truncated.snapshot.finishes.count == 1)
            let notFound = await #expect(throws: OriginError.httpStatus) {
                try await client.fetch(origin.url("/notfound/%E9"), maxBytes: 1024)
            }
            #expect(notFound?.httpStatus == 404)
            await #expect(throws: OriginError.tooManyRedirects) { try await client.fetch(origin.url("/loop/%E9"), maxBytes: 1024) }
            #expect(origin.hits("/loop/%E9") == 1)
        }
    }

    @Test func aRefusedConnectionIsANetworkError() async throws {
        try await withOrigin { origin, client, _ in
            let closed = try OriginURL("http://127.0.0.1:1/%E9.ts")
            await #expect(throws: OriginError.network) { try await client.fetch(closed, maxBytes: 1024) }
        }
    }

    @Test func cancelAfterTheHeadFinishesOnceWithCancelled() async throws {
        try await withOrigin { origin, client, group in
            let eventLoop = group.next()
            let box = TaskBox()
            let handler = RecordingHandler(eventLoop: eventLoop) { _ in box.task?.cancel() }
            let task = client.stream(origin.url("/slow/%E9"), on: eventLoop, handler: handler)
            box.task = task
            await #expect(throws: OriginError.cancelled) { try await task.futureResult.get() }
            #expect(handler.snapshot.heads.count == 1)
            #expect(handler.snapshot.finishes.count == 1)
            #expect(handler.error == .cancelled)
        }
    }
}

private func needsRawExchange(_ url: String) -> Bool {
    OriginClient.needsRawExchange(try! OriginURL(url))
}
