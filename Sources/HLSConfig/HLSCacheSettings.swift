import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSOrigin
import HLSProxy

/// Every setting of hlscache as a typed value: what Config/hlscache.yaml, the `HLSCACHE_*` environment variables
/// and the command-line flags resolve to (see ``SettingsLoader``). The defaults are the built-in ones, read from
/// the configuration structs of each module so the two cannot drift apart.
package struct HLSCacheSettings: Sendable, Equatable {
    /// A header or cookie sent to one origin.
    package struct Field: Sendable, Equatable {
        package var name: String
        package var value: String
        package init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Headers and cookies sent to one origin host (`origins.<host>.headers`, `origins.<host>.cookies`).
    package struct OriginSettings: Sendable, Equatable {
        package var headers: [Field] = []
        package var cookies: [Field] = []
        package init(headers: [Field] = [], cookies: [Field] = []) {
            self.headers = headers
            self.cookies = cookies
        }
    }

    /// `log.format`.
    package enum LogFormat: String, Sendable, Equatable, CaseIterable {
        case text, json
    }

    // Server
    package var listen: ListenAddress
    /// `nil`: `$XDG_CACHE_HOME/hlscache` or `~/.cache/hlscache` (see ``DefaultCacheDirectory``).
    package var cacheDirectory: String?
    package var maxCacheBytes: Int64
    package var freeDiskCushion: Int64
    package var volatileQueryParameters: [String]
    /// `http.allowedWebOrigins`, as written (parsed by ``webOriginPolicy``).
    package var allowedWebOrigins: [String]
    /// `http.serverNames`.
    package var serverNames: [String] = []
    /// `http.eventLoops`: the event loops (threads) that serve clients and origins; nil: `auto`, one per core this
    /// process may use (NIO's `System.coreCount`, which reads the container's CPU quota and CPU set).
    package var eventLoops: Int?
    package var logLevel: String
    package var logFormat: LogFormat = .text
    package var maxPlaylistBytes: Int
    package var strictPlaylists: Bool
    package var liveTTLFactor: Double
    /// `live.rewindWindow` (zero: off).
    package var liveRewindWindow: Duration = .zero
    package var prefetchSegments: Int
    /// `prefetch.through`: the balancer read-ahead asks (`scheme://authority`), nil: the origin.
    package var prefetchThrough: String?
    package var maxConnections: Int
    package var idleTimeout: Duration
    package var requestHeadTimeout: Duration
    package var requestBodyTimeout: Duration
    package var sendTimeout: Duration
    package var maxHeaderCount: Int
    package var sendSliceBytes: Int
    package var inFlightBufferBytes: Int
    package var inFlightMemoryBytes: Int64
    package var maxObjectBytes: Int64
    package var sliceSize: Int64
    /// nil: `auto` (``MemoryTierSizing``).
    package var memoryCacheBytes: Int?
    package var memoryMaxObjectBytes: Int
    package var memoryLargeSends: Int
    package var memoryColdSends: ColdSendMode
    package var shutdownGrace: Duration = .seconds(10)
    package var metricsEnabled: Bool = true
    package var accessLog: Bool = true
    package var apiToken: String?
    package var apiAllow: [String] = []

    // Origin client
    package var originConnectTimeout: Duration
    package var originReadTimeout: Duration
    package var originMaxConnectionsPerHost: Int
    package var originConnectionWaitTimeout: Duration
    package var originMaxRedirects: Int
    package var originRetries: Int
    package var originRetryBaseDelay: Duration
    package var originRetryMaxDelay: Duration
    package var originAllowedHosts: [String] = []
    package var originAllowLoopback: Bool
    package var originAllowPrivateNetworks: Bool
    package var originAllowLinkLocal: Bool
    package var originAllowCloudMetadata: Bool
    /// `origin.keepCookies`: cookies origins set are kept and sent back (``OriginCookieJar``).
    package var originKeepCookies: Bool
    /// `origin.proxy` as written: `[http://][user:password@]host:port` of an upstream HTTP proxy, or
    /// `socks5://host:port` (checked when loaded; see ``UpstreamProxyAddress``).
    package var originProxy: String?
    /// `origin.caFile`: extra trusted certificate authorities (PEM) for https origins.
    package var originCAFile: String?
    /// `nil`: `hlscache/VERSION`.
    package var originUserAgent: String?
    /// Per-origin headers and cookies, keyed by lowercased `host` or `host:port`.
    package var origins: [String: OriginSettings] = [:]

    // Keys
    package var keyTTL: Duration?
    package var keysAllow: [String] = []
    package var keyAutoRenewBefore: Duration?

    // Downloads (`fetch`, and the items `serve` downloads in the background)
    package var downloadResourcesPerItem: Int
    package var downloadConcurrentItems: Int
    package var downloadAttempts: Int
    package var downloadRetryBaseDelay: Duration
    package var downloadRetryMaxDelay: Duration
    package var downloadRateLimit: Int64?
    package var keepFilesOnExpiry: Bool
    package var downloadIdleRetryInterval: Duration
    package var downloadIdleRetryMaxInterval: Duration
    /// `downloads.maxItemSize`: an item larger than this fails `tooLarge`.
    package var downloadMaxItemBytes: Int64?
    /// `downloads.dailyLimit`: bytes all downloads may fetch from origins per day.
    package var downloadDailyLimit: Int64?
    /// `downloads.window`: when background downloads may run (`HH:MM-HH:MM`, local time).
    package var downloadWindow: String?
    /// `downloads.itemRate`: the bandwidth cap of each item without its own.
    package var downloadItemRate: Int64?
    /// `downloads.defaultSeconds`: the precache length of an item created without one (0: the whole stream).
    package var downloadDefaultSeconds: Int
    /// `downloads.autoPurge`: expired items that are not locked are removed (records too) by `serve`.
    package var downloadAutoPurge: Bool

    // Webhooks (issue 27)
    /// `webhooks.urls`: receivers of a signed JSON POST for every item state change.
    package var webhookURLs: [String] = []
    /// `webhooks.secret`: the HMAC-SHA256 key of the signature.
    package var webhookSecret: String?
    /// `webhooks.attempts`: deliveries tried per event and receiver.
    package var webhookAttempts: Int = 5
    /// `webhooks.retryBaseDelay`: the wait before the second delivery; doubled each time.
    package var webhookRetryBaseDelay: Duration = .seconds(1)
    /// `webhooks.stopWait`: at a stop, how long the deliveries may go on to empty the queues.
    package var webhookStopWait: Duration = .seconds(5)
    /// `webhooks.queueSize`: events waiting for delivery; past it the oldest is dropped (and counted).
    package var webhookQueueSize: Int = 1024

    /// The built-in defaults.
    package init() {
        let proxy = ProxyConfiguration(cacheDirectory: "")
        listen = ListenAddress(host: proxy.host, port: proxy.port)
        maxCacheBytes = proxy.maxCacheBytes
        freeDiskCushion = proxy.freeDiskCushion
        volatileQueryParameters = proxy.volatileQueryParameters
        allowedWebOrigins = proxy.webOrigins.entries.map(\.description)
        logLevel = "info"
        maxPlaylistBytes = proxy.maxPlaylistBytes
        strictPlaylists = proxy.strictPlaylists
        liveTTLFactor = proxy.liveTTLFactor
        prefetchSegments = proxy.prefetchSegments
        prefetchThrough = proxy.prefetchThrough
        maxConnections = proxy.maxConnections
        idleTimeout = .nanoseconds(proxy.idleTimeout.nanoseconds)
        requestHeadTimeout = .nanoseconds(proxy.requestHeadTimeout.nanoseconds)
        requestBodyTimeout = .nanoseconds(proxy.requestBodyTimeout.nanoseconds)
        sendTimeout = .nanoseconds(proxy.sendTimeout.nanoseconds)
        maxHeaderCount = proxy.maxHeaderCount
        sendSliceBytes = proxy.sendSliceBytes
        inFlightBufferBytes = proxy.maxInFlightBufferBytes
        inFlightMemoryBytes = proxy.maxInFlightMemoryBytes
        maxObjectBytes = proxy.maxObjectBytes
        sliceSize = proxy.sliceSize
        memoryCacheBytes = nil
        memoryMaxObjectBytes = proxy.memoryMaxObjectBytes
        memoryLargeSends = proxy.memoryLargeSends
        memoryColdSends = proxy.memoryColdSends

        let origin = OriginConfiguration()
        originConnectTimeout = .nanoseconds(origin.connectTimeout.nanoseconds)
        originReadTimeout = .nanoseconds(origin.readTimeout.nanoseconds)
        originMaxConnectionsPerHost = origin.maxConnectionsPerHost
        originConnectionWaitTimeout = .nanoseconds(origin.connectionWaitTimeout.nanoseconds)
        originMaxRedirects = origin.maxRedirects
        originRetries = origin.retry.maxRetries
        originRetryBaseDelay = .nanoseconds(origin.retry.baseDelay.nanoseconds)
        originRetryMaxDelay = .nanoseconds(origin.retry.maxDelay.nanoseconds)
        originAllowLoopback = origin.destinationPolicy.allowLoopback
        originAllowPrivateNetworks = origin.destinationPolicy.allowPrivateNetworks
        originAllowLinkLocal = origin.destinationPolicy.allowLinkLocal
        originAllowCloudMetadata = origin.destinationPolicy.allowCloudMetadata
        originKeepCookies = origin.keepsCookies

        let keys = KeyConfiguration()
        keyTTL = keys.ttl
        keyAutoRenewBefore = keys.autoRenewBefore

        let downloads = DownloaderConfiguration()
        downloadResourcesPerItem = downloads.resourcesPerItem
        downloadConcurrentItems = downloads.concurrentItems
        downloadAttempts = downloads.attempts
        downloadRetryBaseDelay = downloads.retryBaseDelay
        downloadRetryMaxDelay = downloads.retryMaxDelay
        downloadRateLimit = downloads.bytesPerSecond
        keepFilesOnExpiry = downloads.keepFilesOnExpiry
        downloadDefaultSeconds = downloads.defaultSeconds
        downloadAutoPurge = downloads.autoPurgeExpired
        downloadIdleRetryInterval = downloads.idleRetryInterval
        downloadIdleRetryMaxInterval = downloads.idleRetryMaxInterval
        shutdownGrace = proxy.shutdownGrace
        metricsEnabled = proxy.metricsEnabled
        accessLog = proxy.accessLog
    }
}
