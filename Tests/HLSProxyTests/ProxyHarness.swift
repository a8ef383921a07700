import AsyncHTTPClient
import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSKeys
import HLSOrigin
import HLSTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

@testable import HLSProxy

/// A proxy on 127.0.0.1 (OS-chosen port) with its own temporary cache, in front of a ``TestOrigin``.
final class ProxyHarness: Sendable {
    let origin: TestOrigin
    let server: ProxyServer
    let store: CacheStore
    let cacheDirectory: URL
    let originClient: OriginClient
    let client: HTTPClient
    let keys: KeyService
    /// Whether ``shutdown()`` or ``stopKeepingOriginAndCache()`` ran.
    private let stopped = NIOLockedValueBox(false)

    static func start(
        serving root: URL,
        configure: (inout ProxyConfiguration) -> Void = { _ in },
        configureOrigin: (inout OriginConfiguration) -> Void = { _ in },
        configureKeys: (inout KeyConfiguration) -> Void = { _ in },
        keyClock: @escaping @Sendable () -> Date = Date.init,
        accessLogger: Logger? = nil,
        logger explicitLogger: Logger? = nil,
        group: MultiThreadedEventLoopGroup = .singleton,
        threadPool: NIOThreadPool = .singleton
    ) async throws -> ProxyHarness {
        let origin = TestOrigin(root: root)
        try await origin.start()
        do {
            return try await start(
                origin: origin, configure: configure, configureOrigin: configureOrigin, configureKeys: configureKeys, keyClock: keyClock,
                accessLogger: accessLogger, logger: explicitLogger, group: group, threadPool: threadPool)
        } catch {
            await origin.stop()
            throw error
        }
    }

    static func start(
        origin: TestOrigin,
        configure: (inout ProxyConfiguration) -> Void = { _ in },
        configureOrigin: (inout OriginConfiguration) -> Void = { _ in },
        configureKeys: (inout KeyConfiguration) -> Void = { _ in },
        keyClock: @escaping @Sendable () -> Date = Date.init,
        accessLogger: Logger? = nil,
        logger explicitLogger: Logger? = nil,
        group: MultiThreadedEventLoopGroup = .singleton,
        threadPool: NIOThreadPool = .singleton
    ) async throws -> ProxyHarness {
        let cacheDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-test-\(UUID().uuidString)")
        var configuration = ProxyConfiguration(cacheDirectory: cacheDirectory.path)
        configuration.port = 0
        // A test client reads as soon as its task runs; on a loaded machine (both cores busy, the cooperative pool's
        // two threads taken) it can take no bytes for a minute, and the default 60 s send timeout then cut a large
        // body short ("stream ended at an unexpected time"). Tests of the send timeout set their own.
        configuration.sendTimeout = .seconds(600)
        configure(&configuration)
        var originConfiguration = OriginConfiguration()
        // The in-process origin answers at once; only a starved test process (both cores loaded by other work) is slow,
        // and a short read timeout then turned a normal answer into a 504. Tests of timeouts set their own.
        originConfiguration.readTimeout = .seconds(60)
        // Loopback connects are refused or accepted at once; only a stalled test process (a loaded CI machine paused
        // one for ~20 s) waits, and a short timeout then turned an origin's 404 into a 504.
        originConfiguration.connectTimeout = .seconds(60)
        configureOrigin(&originConfiguration)
        var logger = Logger(label: "hlscache-test")
        logger.logLevel = ProcessInfo.processInfo.environment["HLSCACHE_TEST_LOG"] == "debug" ? .debug : .error
        if let explicitLogger { logger = explicitLogger }
        let store = try CacheStore.open(
            directory: configuration.cacheDirectory, maxBytes: configuration.maxCacheBytes, freeDiskCushion: 0)
        let originClient = OriginClient(eventLoopGroup: group, configuration: originConfiguration, logger: logger)
        var keyConfiguration = KeyConfiguration()
        configureKeys(&keyConfiguration)
        let masterKey = try MasterKey.load(directory: configuration.cacheDirectory, environment: [:])
        let keys = try KeyService(
            directory: configuration.cacheDirectory, configuration: keyConfiguration, masterKey: masterKey, fetcher: originClient,
            logger: logger,
            now: keyClock)
        let server = ProxyServer(
            configuration: configuration, store: store, origin: originClient, keys: keys, group: group, threadPool: threadPool,
            logger: logger, accessLogger: accessLogger)
        // As `serve` does: the test process holds many servers' and clients' descriptors at once, and a server turns
        // connections away within a headroom of the soft limit (DescriptorHeadroom).
        _ = DescriptorLimit.raiseToHard()
        do {
            try await server.start()
        } catch {
            // A server that did not start (a test of that): what was made for it is let go.
            try? await server.stop()
            try? await originClient.shutdown()
            store.close()
            try? FileManager.default.removeItem(at: cacheDirectory)
            throw error
        }
        // Connections to the proxy on loopback are made at once; only a starved test process waits (a bound of 60 s,
        // not AsyncHTTPClient's 10 s, which a machine at load 40 exceeded).
        // Its idle connections go well before the server's idle timeout (60 s) closes them: with both at 60 s, a request
        // after a pause of about a minute could be written to a connection the server had just closed.
        var clientConfiguration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(60)))
        clientConfiguration.connectionPool = .init(idleTimeout: .seconds(20))
        let client = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: clientConfiguration)
        return ProxyHarness(
            origin: origin, server: server, store: store, cacheDirectory: cacheDirectory, originClient: originClient, client: client,
            keys: keys)
    }

    private init(
        origin: TestOrigin, server: ProxyServer, store: CacheStore, cacheDirectory: URL, originClient: OriginClient, client: HTTPClient,
        keys: KeyService
    ) {
        self.keys = keys
        self.origin = origin
        self.server = server
        self.store = store
        self.cacheDirectory = cacheDirectory
        self.originClient = originClient
        self.client = client
    }

    var port: Int { server.localAddress?.port ?? 0 }
    var base: String { "http://127.0.0.1:\(port)" }

    /// The proxy URL of a path on the test origin.
    func url(_ originPath: String) -> String { "\(base)/http/127.0.0.1:\(origin.port)\(originPath)" }

    /// The direct origin URL of a path.
    func originURL(_ originPath: String) -> String { "\(origin.baseURL)\(originPath)" }

    struct Response {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    func get(_ url: String, headers: [(String, String)] = [], method: HTTPMethod = .GET) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await client.execute(request, timeout: .seconds(120))
        var body: [UInt8] = []
        for try await chunk in response.body { body.append(contentsOf: chunk.readableBytesView) }
        return Response(status: Int(response.status.code), headers: response.headers, body: body)
    }

    /// Waits until no origin download is in flight (background fills included); throws if one still is after
    /// `timeout` (a bound for a stuck download, not a measurement).
    func waitForIdle(timeout: Duration = .seconds(300)) async throws {
        try await waitUntil("no origin download in flight (\(server.services.fetches.count) left)", timeout: timeout) {
            server.services.fetches.count == 0
        }
    }

    /// Stops the server and its clients, and keeps the origin running and the cache directory as they are: a
    /// restart is another harness started on the same origin with the same `cacheDirectory`.
    func stopKeepingOriginAndCache() async {
        stopped.withLockedValue { $0 = true }
        try? await client.shutdown()
        try? await server.stop()
        try? await originClient.shutdown()
        store.close()
    }

    func shutdown() async {
        stopped.withLockedValue { $0 = true }
        await Self.shutdown(client: client, server: server, originClient: originClient, origin: origin, store: store, cacheDirectory)
    }

    private static func shutdown(
        client: HTTPClient, server: ProxyServer, originClient: OriginClient, origin: TestOrigin, store: CacheStore, _ cacheDirectory: URL
    ) async {
        try? await client.shutdown()
        try? await server.stop()
        try? await originClient.shutdown()
        await origin.stop()
        store.close()
        try? FileManager.default.removeItem(at: cacheDirectory)
    }

    /// A harness dropped without a shutdown (its test threw before the end: a wait that timed out, a request that
    /// failed) is shut down in the background: the failure stays that test's, instead of AsyncHTTPClient trapping
    /// on a client freed before its shutdown and taking the whole test process down.
    deinit {
        guard !stopped.withLockedValue({ $0 }) else { return }
        let (client, server, originClient, origin, store, cacheDirectory) = (client, server, originClient, origin, store, cacheDirectory)
        Task {
            await Self.shutdown(client: client, server: server, originClient: originClient, origin: origin, store: store, cacheDirectory)
        }
    }
}

/// A blocking TCP client for protocol-level tests (pipelining, smuggling, slowloris), run off the test's executor.
enum RawHTTP {
    /// Sends `request`, then reads until the peer closes or `readTimeout` passes without data (60 s by default: a
    /// refusal closes the connection at once, and a loaded machine must not turn a late answer into none).
    static func exchange(port: Int, _ request: [UInt8], readTimeout: Double = 60, pauseAfter: Double = 0) async throws -> (
        response: String, closedByPeer: Bool
    ) {
        let (bytes, closed) = try await exchangeBytes(port: port, request, readTimeout: readTimeout, pauseAfter: pauseAfter)
        return (String(decoding: bytes, as: UTF8.self), closed)
    }

    /// ``exchange(port:_:readTimeout:pauseAfter:)`` with the response's bytes as they came.
    /// - Parameter receiveBuffer: the socket's `SO_RCVBUF` (0: the system's), set before connecting so that it bounds
    ///   the window: with a small one and `pauseAfter`, the client stops reading as a stalled player would.
    /// - Parameter pace: read like a slow player: after each `bytes` received, pause `seconds`.
    static func exchangeBytes(
        port: Int, _ request: [UInt8], readTimeout: Double = 60, pauseAfter: Double = 0, receiveBuffer: Int32 = 0,
        pace: (bytes: Int, seconds: Double)? = nil
    ) async throws -> (response: [UInt8], closedByPeer: Bool) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        try blockingExchange(
                            port: port, [request], gap: 0, readTimeout: readTimeout, pauseAfter: pauseAfter, receiveBuffer: receiveBuffer,
                            pace: pace)
                    })
            }
        }
    }

    /// Sends each of `requests` on one connection, `gap` seconds apart (each arrives as a read of its own), then reads
    /// as ``exchange(port:_:readTimeout:pauseAfter:)`` does.
    static func exchange(port: Int, _ requests: [[UInt8]], gap: Double, readTimeout: Double = 60) async throws -> (
        response: String, closedByPeer: Bool
    ) {
        let (bytes, closed) = try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result { try blockingExchange(port: port, requests, gap: gap, readTimeout: readTimeout, pauseAfter: 0) })
            }
        }
        return (String(decoding: bytes, as: UTF8.self), closed)
    }

    struct SocketError: Error {}

    /// The status codes of the responses in `response`, in order, found in its bytes: searched as a `String`, a
    /// random body ending in a character that joins the next one (U+0600, a prepended concatenation mark) swallowed
    /// the next status line into one grapheme, and a response looked missing.
    static func statuses(_ response: String) -> [String] {
        let bytes = Array(response.utf8)
        let marker = Array("HTTP/1.1 ".utf8)
        var found: [String] = []
        var index = 0
        while index + marker.count + 3 <= bytes.count {
            if bytes[index..<index + marker.count].elementsEqual(marker) {
                found.append(String(decoding: bytes[index + marker.count..<index + marker.count + 3], as: UTF8.self))
                index += marker.count
            } else {
                index += 1
            }
        }
        return found
    }

    private static func blockingExchange(port: Int, _ request: [UInt8], readTimeout: Double, pauseAfter: Double) throws -> ([UInt8], Bool) {
        try blockingExchange(port: port, [request], gap: 0, readTimeout: readTimeout, pauseAfter: pauseAfter)
    }

    private static func blockingExchange(
        port: Int, _ requests: [[UInt8]], gap: Double, readTimeout: Double, pauseAfter: Double, receiveBuffer: Int32 = 0,
        pace: (bytes: Int, seconds: Double)? = nil
    ) throws -> ([UInt8], Bool) {
        let fd = try LoopbackSocket.connect(port: port, receiveBuffer: receiveBuffer > 0 ? receiveBuffer : nil, readTimeout: readTimeout)
        defer { close(fd) }
        for (index, request) in requests.enumerated() {
            if index > 0 && gap > 0 { Thread.sleep(forTimeInterval: gap) }
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        if pauseAfter > 0 { Thread.sleep(forTimeInterval: pauseAfter) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        var sincePause = 0
        while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 {
                received.append(contentsOf: buffer[0..<n])
                sincePause += n
                if let pace, sincePause >= pace.bytes {
                    sincePause = 0
                    Thread.sleep(forTimeInterval: pace.seconds)
                }
            } else {
                // A reset (the server closed with our bytes unread) is a close too.
                return (received, n == 0 || errno == ECONNRESET)
            }
        }
    }
}
