import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSKeys
import HLSOrigin
import Logging
import NIOConcurrencyHelpers
import NIOPosix

/// A ``Downloader`` on a temporary cache directory in front of a ``TestOrigin``, with fast retries and an
/// event log (and `observe`, called with each event as the downloader emits it), for the `hlscache fetch`
/// integration tests.
package final class DownloaderHarness: Sendable {
    package let origin: TestOrigin
    package let cacheDirectory: URL
    package let store: CacheStore
    package let items: ItemStore
    package let originClient: OriginClient
    package let downloader: Downloader
    package let keys: KeyService
    private let eventLog = NIOLockedValueBox<[DownloadEvent]>([])
    /// Whether ``shutdown(keepingCache:)`` ran.
    private let stopped = NIOLockedValueBox(false)

    package init(
        origin: TestOrigin, cacheDirectory: URL? = nil, maxBytes: Int64 = 1 << 30,
        commitThreadPool: NIOThreadPool? = nil,
        configure: (inout DownloaderConfiguration) -> Void = { _ in },
        configureOrigin: (inout OriginConfiguration) -> Void = { _ in },
        logger explicitLogger: Logger? = nil,
        observe: @escaping @Sendable (DownloadEvent) -> Void = { _ in }
    ) throws {
        self.origin = origin
        self.cacheDirectory =
            cacheDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fetch-\(UUID().uuidString)")
        store = try CacheStore.open(directory: self.cacheDirectory.path, maxBytes: maxBytes, freeDiskCushion: 0)
        // The master key serve and fetch use: it seals the items' headers and the key store (keys.sqlite).
        let masterKey = try MasterKey.load(directory: self.cacheDirectory.path, environment: [:])
        items = try ItemStore(directory: self.cacheDirectory.path, masterKey: masterKey)
        var logger = Logger(label: "hlscache-fetch-test")
        logger.logLevel = .error
        if let explicitLogger { logger = explicitLogger }
        var originConfiguration = OriginConfiguration()
        originConfiguration.retry.maxRetries = 0
        // The in-process origin answers at once; only a starved test process (both cores loaded by other work) is slow,
        // and a short read timeout then turned a normal answer into a 504. Tests of timeouts set their own.
        originConfiguration.readTimeout = .seconds(60)
        // Loopback connects are refused or accepted at once; only a stalled test process (a loaded CI machine paused
        // one for ~20 s) waits, and a short timeout then turned an origin's 404 into a 504.
        originConfiguration.connectTimeout = .seconds(60)
        configureOrigin(&originConfiguration)
        originClient = OriginClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: originConfiguration, logger: logger)
        var configuration = DownloaderConfiguration()
        configuration.retryBaseDelay = .milliseconds(20)
        configuration.statePollInterval = .milliseconds(50)
        configure(&configuration)
        let log = eventLog
        let keys = try KeyService(
            directory: self.cacheDirectory.path, configuration: KeyConfiguration(), masterKey: masterKey, fetcher: originClient,
            logger: logger)
        self.keys = keys
        downloader = Downloader(
            store: store, items: items, origin: originClient, eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            commitThreadPool: commitThreadPool, configuration: configuration, keys: keys, logger: logger,
            onEvent: { event in
                log.withLockedValue { $0.append(event) }
                observe(event)
            })
    }

    package var events: [DownloadEvent] { eventLog.withLockedValue { $0 } }

    package func url(_ path: String) -> String { "\(origin.baseURL)\(path)" }

    package func key(_ path: String) throws -> CacheKey { CacheKey(try OriginURL(url(path))) }

    /// Records an item and runs it to the end.
    @discardableResult
    package func fetch(
        _ path: String, id: String = DownloadItem.generateID(), seconds: Int = 0, selection: RenditionSelection = RenditionSelection(),
        locked: Bool = false, expiresAt: Date? = nil
    ) async throws -> DownloadItem {
        try items.insert(
            DownloadItem(id: id, url: url(path), selection: selection, precacheSeconds: seconds, expiresAt: expiresAt, locked: locked))
        return try await downloader.run(id)
    }

    /// The stored bytes of an origin path, or nil.
    package func stored(_ path: String) throws -> [UInt8]? {
        guard let object = store.lookup(try key(path)) else { return nil }
        return FileManager.default.contents(atPath: object.path).map { [UInt8]($0) }
    }

    package func shutdown(keepingCache: Bool = false) async {
        stopped.withLockedValue { $0 = true }
        try? await originClient.shutdown()
        store.close()
        if !keepingCache { try? FileManager.default.removeItem(at: cacheDirectory) }
    }

    /// A harness dropped without a shutdown (its test threw before the end) has its origin client shut down in the
    /// background, its cache left as it is: the failure stays that test's, instead of AsyncHTTPClient trapping on a
    /// client freed before its shutdown and taking the whole test process down.
    deinit {
        guard !stopped.withLockedValue({ $0 }) else { return }
        let originClient = originClient
        Task { try? await originClient.shutdown() }
    }
}
