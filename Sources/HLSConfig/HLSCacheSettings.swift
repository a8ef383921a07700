import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSOrigin
import HLSProxy

/// Every setting of hlscache as a typed value: what Config/hlscache.yaml, the `HLSCACHE_*` environment variables
/// and the command-line flags resolve to (see ``SettingsLoader``). The defaults are the built-in ones, read from
/// the configuration structs of each module so the two cannot drift apart.
public struct HLSCacheSettings: Sendable, Equatable {
    /// A header or cookie sent to one origin.
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Headers and cookies sent to one origin host (`origins.<host>.headers`, `origins.<host>.cookies`).
    public struct OriginSettings: Sendable, Equatable {
        public var headers: [Field] = []
        public var cookies: [Field] = []
        public init(headers: [Field] = [], cookies: [Field] = []) {
            self.headers = headers
            self.cookies = cookies
        }
    }

    /// `log.format`.
    public enum LogFormat: String, Sendable, Equatable, CaseIterable {
        case text, json
    }

    // Server
    public var listen: ListenAddress
    /// `nil`: `$XDG_CACHE_HOME/hlscache` or `~/.cache/hlscache` (see ``DefaultCacheDirectory``).
    public var cacheDirectory: String?
    public var maxCacheBytes: Int64
    public var freeDiskCushion: Int64
    public var volatileQueryParameters: [String]
    /// `http.allowedWebOrigins`, as written (parsed by ``webOriginPolicy``).
    public var allowedWebOrigins: [String]
    public var logLevel: String
    public var logFormat: LogFormat = .text
    public var maxPlaylistBytes: Int
    public var strictPlaylists: Bool
    public var liveTTLFactor: Double
    public var prefetchSegments: Int
    public var maxConnections: Int
    public var idleTimeout: Duration
    public var requestHeadTimeout: Duration
    public var requestBodyTimeout: Duration
    public var sendTimeout: Duration
    public var maxHeaderCount: Int
    public var inFlightBufferBytes: Int
    public var inFlightMemoryBytes: Int64
    public var maxObjectBytes: Int64
    public var sliceSize: Int64
    public var memoryCacheBytes: Int
    public var memoryMaxObjectBytes: Int
    public var shutdownGrace: Duration = .seconds(10)
    public var metricsEnabled: Bool = true
    public var accessLog: Bool = true
    public var apiToken: String?
    public var apiAllow: [String] = []

    // Origin client
    public var originConnectTimeout: Duration
    public var originReadTimeout: Duration
    public var originMaxConnectionsPerHost: Int
    public var originConnectionWaitTimeout: Duration
    public var originMaxRedirects: Int
    public var originRetries: Int
    public var originRetryBaseDelay: Duration
    public var originRetryMaxDelay: Duration
    public var originAllowedHosts: [String] = []
    public var originAllowLoopback: Bool
    public var originAllowPrivateNetworks: Bool
    public var originAllowLinkLocal: Bool
    public var originAllowCloudMetadata: Bool
    /// `origin.keepCookies`: cookies origins set are kept and sent back (``OriginCookieJar``).
    public var originKeepCookies: Bool
    /// `origin.proxy` as written: `[http://][user:password@]host:port` of an upstream HTTP proxy, or
    /// `socks5://host:port` (checked when loaded; see ``UpstreamProxyAddress``).
    public var originProxy: String?
    /// `origin.caFile`: extra trusted certificate authorities (PEM) for https origins.
    public var originCAFile: String?
    /// `nil`: `hlscache/VERSION`.
    public var originUserAgent: String?
    /// Per-origin headers and cookies, keyed by lowercased `host` or `host:port`.
    public var origins: [String: OriginSettings] = [:]

    // Keys
    public var keyTTL: Duration?
    public var keysAllow: [String] = []
    public var keyAutoRenewBefore: Duration?

    // Downloads (`fetch`, and the items `serve` downloads in the background)
    public var downloadResourcesPerItem: Int
    public var downloadConcurrentItems: Int
    public var downloadAttempts: Int
    public var downloadRetryBaseDelay: Duration
    public var downloadRetryMaxDelay: Duration
    public var downloadRateLimit: Int64?
    public var keepFilesOnExpiry: Bool
    public var downloadIdleRetryInterval: Duration
    public var downloadIdleRetryMaxInterval: Duration
    /// `downloads.maxItemSize`: an item larger than this fails `tooLarge`.
    public var downloadMaxItemBytes: Int64?
    /// `downloads.dailyLimit`: bytes all downloads may fetch from origins per day.
    public var downloadDailyLimit: Int64?
    /// `downloads.window`: when background downloads may run (`HH:MM-HH:MM`, local time).
    public var downloadWindow: String?
    /// `downloads.itemRate`: the bandwidth cap of each item without its own.
    public var downloadItemRate: Int64?

    // Webhooks (issue 27)
    /// `webhooks.urls`: receivers of a signed JSON POST for every item state change.
    public var webhookURLs: [String] = []
    /// `webhooks.secret`: the HMAC-SHA256 key of the signature.
    public var webhookSecret: String?
    /// `webhooks.attempts`: deliveries tried per event and receiver.
    public var webhookAttempts: Int = 5
    /// `webhooks.retryBaseDelay`: the wait before the second delivery; doubled each time.
    public var webhookRetryBaseDelay: Duration = .seconds(1)
    /// `webhooks.queueSize`: events waiting for delivery; past it the oldest is dropped (and counted).
    public var webhookQueueSize: Int = 1024

    /// The built-in defaults.
    public init() {
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
        maxConnections = proxy.maxConnections
        idleTimeout = .nanoseconds(proxy.idleTimeout.nanoseconds)
        requestHeadTimeout = .nanoseconds(proxy.requestHeadTimeout.nanoseconds)
        requestBodyTimeout = .nanoseconds(proxy.requestBodyTimeout.nanoseconds)
        sendTimeout = .nanoseconds(proxy.sendTimeout.nanoseconds)
        maxHeaderCount = proxy.maxHeaderCount
        inFlightBufferBytes = proxy.maxInFlightBufferBytes
        inFlightMemoryBytes = proxy.maxInFlightMemoryBytes
        maxObjectBytes = proxy.maxObjectBytes
        sliceSize = proxy.sliceSize
        memoryCacheBytes = proxy.memoryCacheBytes
        memoryMaxObjectBytes = proxy.memoryMaxObjectBytes

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
        downloadIdleRetryInterval = downloads.idleRetryInterval
        downloadIdleRetryMaxInterval = downloads.idleRetryMaxInterval
        shutdownGrace = proxy.shutdownGrace
        metricsEnabled = proxy.metricsEnabled
        accessLog = proxy.accessLog
    }
}
