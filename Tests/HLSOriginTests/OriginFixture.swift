import HLSCacheCore
import HLSOrigin
import HLSTestSupport
import Logging
import NIOCore
import NIOPosix

/// Runs `body` with a fresh event loop group, a test origin on it and a client sharing it, then tears all
/// three down. Retries back off by milliseconds so the retry tests stay fast.
func withOrigin(
    configure: (inout OriginConfiguration) -> Void = { _ in },
    _ body: (TestOrigin, OriginClient, MultiThreadedEventLoopGroup) async throws -> Void
) async throws {
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    let origin = try await TestOrigin.routed(group: group)
    var configuration = OriginConfiguration()
    configuration.retry = OriginRetryPolicy(maxRetries: 2, baseDelay: .milliseconds(10), maxDelay: .milliseconds(50))
    configure(&configuration)
    let client = OriginClient(eventLoopGroup: group, configuration: configuration, logger: Logger(label: "hlscache.origin.test"))
    var failure: (any Error)?
    do {
        try await body(origin, client, group)
    } catch {
        failure = error
    }
    try await client.shutdown()
    await origin.stop()
    try await group.shutdownGracefully()
    if let failure { throw failure }
}

/// Streams `url` into a recording handler and waits for `didFinish`.
func streamRecording(
    _ client: OriginClient,
    _ url: OriginURL,
    method: OriginMethod = .GET,
    headers: [(String, String)] = [],
    group: any EventLoopGroup,
    delay: TimeAmount? = nil
) async -> RecordingHandler {
    let eventLoop = group.next()
    let handler = RecordingHandler(eventLoop: eventLoop, delay: delay)
    let task = client.stream(url, method: method, headers: headers, on: eventLoop, handler: handler)
    _ = try? await task.futureResult.get()
    return handler
}

/// Byte-for-byte equality as a plain `Bool`. `#expect(a == b)` on two arrays makes Swift Testing compute their
/// difference when they differ, which for two different megabyte bodies is O(N·D) and ran for many minutes (a whole
/// test run stuck at full CPU after one failed comparison); this reports the failure at once.
func sameBytes<A: Sequence, B: Sequence>(_ a: A, _ b: B) -> Bool where A.Element == UInt8, B.Element == UInt8 {
    a.elementsEqual(b)
}
