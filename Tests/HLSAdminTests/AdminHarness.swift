import AsyncHTTPClient
import Foundation
import HLSAdmin
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSKeys
import HLSOrigin
import HLSProxy
import HLSTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// What `hlscache serve` runs, in the test process: a proxy on 127.0.0.1 (OS-chosen port) with the admin API as
/// its route extension, a downloader and scheduler on a temporary cache directory, in front of a ``TestOrigin``.
final class AdminHarness: Sendable {
    let origin: TestOrigin
    let cacheDirectory: URL
    let store: CacheStore
    let items: ItemStore
    let keys: KeyService
    let proxyOrigin: OriginClient
    let downloadOrigin: OriginClient
    let downloader: Downloader
    let hub: EventHub
    let admin: AdminAPI
    let server: ProxyServer
    let client: HTTPClient
    let tasks: NIOLockedValueBox<[Task<Void, Never>]> = NIOLockedValueBox([])
    let webhooks: WebhookNotifier?

    /// - Parameter itemsBusyTimeout: how long `items.sqlite` writes wait for another connection's (10 s in production).
    init(
        root: URL, cacheDirectory existing: URL? = nil, itemsBusyTimeout: TimeInterval = 10, maxBytes: Int64 = 1 << 30,
        configure: (inout AdminConfiguration) -> Void = { _ in },
        proxy configureProxy: (inout ProxyConfiguration) -> Void = { _ in },
        downloader configureDownloader: (inout DownloaderConfiguration) -> Void = { _ in },
        webhooks webhookConfiguration: WebhookConfiguration? = nil
    ) async throws {
        origin = TestOrigin(root: root)
        try await origin.start()
        cacheDirectory = existing ?? FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-admin-\(UUID().uuidString)")
        var logger = Logger(label: "hlscache-admin-test")
        logger.logLevel = ProcessInfo.processInfo.environment["HLSCACHE_TEST_LOG"] == "debug" ? .debug : .error
        var configuration = ProxyConfiguration(cacheDirectory: cacheDirectory.path)
        configuration.port = 0
        configuration.prefetchSegments = 0
        configureProxy(&configuration)
        store = try CacheStore.open(directory: cacheDirectory.path, maxBytes: maxBytes, freeDiskCushion: 0)
        items = try ItemStore(directory: cacheDirectory.path, busyTimeout: itemsBusyTimeout)
        let group = MultiThreadedEventLoopGroup.singleton
        var originConfiguration = OriginConfiguration()
        // The in-process origin answers at once; only a starved test process (both cores loaded by other work) is slow,
        // and a short read timeout then turned a normal answer into a 504. Tests of timeouts set their own.
        originConfiguration.readTimeout = .seconds(60)
        // Loopback connects are refused or accepted at once; only a stalled test process waits (as in ProxyHarness).
        originConfiguration.connectTimeout = .seconds(60)
        proxyOrigin = OriginClient(eventLoopGroup: group, configuration: originConfiguration, logger: logger)
        originConfiguration.retry.maxRetries = 0
        downloadOrigin = OriginClient(eventLoopGroup: group, configuration: originConfiguration, logger: logger)
        keys = try KeyService(
            directory: cacheDirectory.path, configuration: KeyConfiguration(),
            masterKey: try MasterKey.load(directory: cacheDirectory.path, environment: [:]), fetcher: proxyOrigin, logger: logger)
        var adminConfiguration = AdminConfiguration()
        adminConfiguration.pollInterval = .milliseconds(100)
        configure(&adminConfiguration)
        let hub = EventHub(progressInterval: adminConfiguration.progressInterval)
        self.hub = hub
        var downloaderConfiguration = DownloaderConfiguration()
        downloaderConfiguration.retryBaseDelay = .milliseconds(20)
        downloaderConfiguration.statePollInterval = .milliseconds(50)
        configureDownloader(&downloaderConfiguration)
        // Following the hub before anything happens, as `serve` does.
        let items = self.items
        let notifier = webhookConfiguration.map { WebhookNotifier(configuration: $0, eventLoopGroup: group, logger: logger, outbox: items) }
        notifier?.follow(hub)
        webhooks = notifier
        downloader = Downloader(
            store: store, items: items, origin: downloadOrigin, eventLoopGroup: group, configuration: downloaderConfiguration, keys: keys,
            logger: logger, onEvent: { hub.publish($0) })
        let scheduler = DownloadScheduler(downloader: downloader, pollInterval: .milliseconds(100))
        admin = AdminAPI(
            configuration: adminConfiguration, downloader: downloader, keys: keys, hub: hub,
            volatileQueryParameters: configuration.volatileQueryParameters, logger: logger, wake: { Task { await scheduler.tick() } })
        server = ProxyServer(
            configuration: configuration, store: store, origin: proxyOrigin, keys: keys, group: group, threadPool: .singleton,
            logger: logger,
            routeExtension: admin)
        // As `serve` does: the test process holds many servers' and clients' descriptors at once, and a server turns
        // connections away within a headroom of the soft limit (DescriptorHeadroom).
        _ = DescriptorLimit.raiseToHard()
        try await server.start()
        // The client lets an idle connection go well before the server's idle timeout (60 s) closes it: with both at
        // 60 s, a request sent after a pause of about a minute (a headless Chromium step on a loaded machine) was
        // written to a connection the server had just closed ("I/O on closed channel"). Connects on loopback are
        // immediate; only a starved test process waits (60 s, not AsyncHTTPClient's 10 s).
        var clientConfiguration = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: .init(connect: .seconds(60)))
        clientConfiguration.connectionPool = .init(idleTimeout: .seconds(20))
        client = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: clientConfiguration)
        let admin = self.admin
        tasks.withLockedValue {
            $0 = [Task { await scheduler.run() }, Task { try? await admin.run() }]
            if let notifier { $0.append(Task { try? await notifier.run() }) }
        }
    }

    var port: Int { server.localAddress?.port ?? 0 }
    var base: String { "http://127.0.0.1:\(port)" }
    func api(_ path: String) -> String { "\(base)/api/v1\(path)" }
    /// The origin URL of a path on the test origin.
    func originURL(_ path: String) -> String { "\(origin.baseURL)\(path)" }
    /// The proxy URL of a path on the test origin.
    func proxyURL(_ path: String) -> String { "\(base)/http/127.0.0.1:\(origin.port)\(path)" }

    struct Response: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]) ?? [:] }
        var jsonValue: Any? { body.isEmpty ? nil : try? JSONSerialization.jsonObject(with: Data(body)) }
    }

    func request(
        _ method: HTTPMethod, _ url: String, json: String? = nil, headers: [(String, String)] = [],
        contentType: String? = "application/json"
    ) async throws -> Response {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        // As a JSON client sends it: state-changing requests say application/json even without a body (CSRF rule).
        if let contentType, json != nil || ![.GET, .HEAD, .OPTIONS].contains(method) {
            request.headers.add(name: "Content-Type", value: contentType)
        }
        if let json { request.body = .bytes(ByteBuffer(string: json)) }
        let response = try await client.execute(request, timeout: .seconds(120))
        var body: [UInt8] = []
        for try await chunk in response.body { body.append(contentsOf: chunk.readableBytesView) }
        return Response(status: Int(response.status.code), headers: response.headers, body: body)
    }

    /// Polls `check` every 50 ms until it returns a value, for at most `timeout` (a bound, not a measurement): the
    /// shared ``HLSTestSupport/eventually(_:timeout:interval:_:)``.
    func eventually<T>(_ what: String, timeout: Duration = .seconds(300), _ check: () async throws -> T?) async throws -> T {
        try await HLSTestSupport.eventually(what, timeout: timeout, interval: .milliseconds(50), check)
    }

    private let stopped = NIOLockedValueBox(false)

    /// For `defer`: shuts down in a task if the test ended early (a thrown error), so nothing is left running.
    func shutdownLater() {
        Task { await self.shutdown() }
    }

    /// - Parameter keepingCache: leave the cache directory for another harness on it (a restart).
    func shutdown(keepingCache: Bool = false) async {
        guard
            stopped.withLockedValue({ was in
                defer { was = true }; return !was
            })
        else { return }
        for task in tasks.withLockedValue({ $0 }) { task.cancel() }
        for task in tasks.withLockedValue({ $0 }) { await task.value }
        try? await client.shutdown()
        try? await server.stop()
        try? await proxyOrigin.shutdown()
        try? await downloadOrigin.shutdown()
        await origin.stop()
        store.close()
        if !keepingCache { try? FileManager.default.removeItem(at: cacheDirectory) }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
}

/// Reads a Server-Sent Events stream in the background and keeps every event, for tests to look at.
final class EventRecorder: Sendable {
    struct Event: Sendable {
        var type: String
        var data: String
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any]) ?? [:] }
    }

    private let received = NIOLockedValueBox<[Event]>([])
    private let status = NIOLockedValueBox<Int?>(nil)
    private let task = NIOLockedValueBox<Task<Void, Never>?>(nil)

    init(client: HTTPClient, url: String, headers: [(String, String)] = []) {
        let received = self.received
        let status = self.status
        task.withLockedValue {
            $0 = Task {
                var request = HTTPClientRequest(url: url)
                for (name, value) in headers { request.headers.add(name: name, value: value) }
                guard let response = try? await client.execute(request, timeout: .seconds(600)) else { return }
                status.withLockedValue { $0 = Int(response.status.code) }
                var pending = ""
                do {
                    for try await chunk in response.body {
                        pending += String(buffer: chunk)
                        while let end = pending.range(of: "\n\n") {
                            let block = pending[..<end.lowerBound]
                            pending = String(pending[end.upperBound...])
                            var type = "message"
                            var data: [String] = []
                            for line in block.split(separator: "\n") {
                                if line.hasPrefix("event: ") { type = String(line.dropFirst(7)) }
                                if line.hasPrefix("data: ") { data.append(String(line.dropFirst(6))) }
                            }
                            if !data.isEmpty {
                                received.withLockedValue { $0.append(Event(type: type, data: data.joined(separator: "\n"))) }
                            }
                        }
                    }
                } catch {}
            }
        }
    }

    var events: [Event] { received.withLockedValue { $0 } }
    var responseStatus: Int? { status.withLockedValue { $0 } }

    /// The states announced for `id`, in order.
    func states(of id: String) -> [String] {
        events.filter { $0.type == "state" && ($0.json["id"] as? String) == id }.compactMap { $0.json["state"] as? String }
    }

    func stop() async {
        let task = self.task.withLockedValue { $0 }
        task?.cancel()
        await task?.value
    }
}
