import HLSCacheCore
import HLSCacheStore
import HLSKeys
import HLSOrigin
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The shared parts every request handler uses, created once by ``ProxyServer``.
final class ProxyServices: Sendable {
    let configuration: ProxyConfiguration
    let store: CacheStore
    let origin: OriginClient
    let logger: Logger
    let group: any EventLoopGroup
    let threadPool: NIOThreadPool
    /// Origin downloads in flight; started only through ``ResourceService/originFetch(key:url:cacheable:purpose:)``.
    let fetches = FetchRegistry()
    /// Slices of large objects being fetched, so concurrent requests share one origin request per slice (Slices/).
    let sliceFlights = SliceFlights()
    /// How large objects are cut into slices (`cache.sliceSize`).
    var sliceLayout: SliceLayout { SliceLayout(sliceSize: configuration.sliceSize) }
    /// Body bytes every in-flight download holds in memory (`limits.inFlightMemory`).
    let inFlight: InFlightMemory
    let playlists: PlaylistService
    /// Small hot objects in memory (`cache.memorySize`).
    let memory: MemoryTier
    /// Keys (every method); `nil` when the server runs without a key service (key URIs are then proxied like any
    /// other resource).
    let keys: KeyService
    /// Metrics, the access log, open connections and the shutdown flag (Operations/).
    let metrics: ProxyMetrics
    let observer: ExchangeObserver
    let connections = ConnectionRegistry()
    /// Responses relayed but not stored: counted, and logged once and then summed up (a full disk fails every miss).
    let cacheWriteFailures: CacheWriteFailureLog
    /// What is set or replaced after the server is made, under one lock.
    struct Adjustable {
        /// Counts of prewarm items by state, for `/metrics`; set by the command that runs a download scheduler.
        var downloadStates: (@Sendable () throws -> [String: Int])?
    }
    let adjustable: NIOLockedValueBox<Adjustable>

    /// `http.allowedWebOrigins`: the configuration's until ``ProxyServer/setWebOrigins(_:)`` replaces it (a reload);
    /// read for each request.
    let webOrigins: LiveWebOrigins

    /// Answers `/api/…` and `/` and observes proxied responses (the admin layer); `nil` keeps the built-in pages.
    let routeExtension: (any ProxyRouteExtension)?

    init(
        configuration: ProxyConfiguration, store: CacheStore, origin: OriginClient, keys: KeyService, group: any EventLoopGroup,
        threadPool: NIOThreadPool, logger: Logger, metrics: ProxyMetrics = ProxyMetrics(), accessLog: Logger? = nil,
        routeExtension: (any ProxyRouteExtension)? = nil
    ) {
        self.routeExtension = routeExtension
        self.configuration = configuration
        self.adjustable = NIOLockedValueBox(Adjustable())
        self.webOrigins = LiveWebOrigins(configuration.webOrigins)
        self.inFlight = InFlightMemory(budget: configuration.maxInFlightMemoryBytes) { [group] in
            // The heap's free pages after a burst of misses go back to the system (a walk of the arenas: off the loops).
            threadPool.runIfActive(eventLoop: group.any()) { MemoryTrim.giveBackFreedMemory() }.whenFailure { _ in }
        }
        self.store = store
        self.origin = origin
        self.group = group
        self.threadPool = threadPool
        self.logger = logger
        self.keys = keys
        let cacheWriteFailures = CacheWriteFailureLog(metrics: metrics, logger: logger)
        self.cacheWriteFailures = cacheWriteFailures
        self.playlists = PlaylistService(
            configuration: configuration, store: store, keys: keys, cookies: origin.cookies, logger: logger, metrics: metrics,
            writeFailures: cacheWriteFailures)
        self.metrics = metrics
        let memory = MemoryTier(
            maxBytes: configuration.memoryCacheBytes, maxObjectBytes: configuration.memoryMaxObjectBytes,
            maxLargeSends: configuration.memoryLargeSends, warmBytes: configuration.memoryWarmBytes,
            coldSends: configuration.memoryColdSends, directory: store.directory,
            now: configuration.memoryTierClock)
        self.memory = memory
        if memory.isEnabled { store.onEviction { keys in memory.remove(keys) } }
        self.observer = ExchangeObserver(metrics: metrics, accessLog: configuration.accessLog ? accessLog : nil)
    }

    var isDraining: Bool { connections.isDraining }

    var anyEventLoop: any EventLoop { group.any() }

    /// Runs blocking work (fsync, file reads, SQLite writes) off the event loops.
    func runBlocking<T: Sendable>(on eventLoop: (any EventLoop)? = nil, _ body: @escaping @Sendable () throws -> T) -> EventLoopFuture<T> {
        threadPool.runIfActive(eventLoop: eventLoop ?? anyEventLoop, body)
    }
}
