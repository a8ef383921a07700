import AsyncHTTPClient
import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSOrigin
import HLSProxy
import NIOCore

/// The module configurations the settings turn into, so `serve`, `fetch` and the other commands hand the same
/// values to the proxy, the origin client, the key service and the downloader.
extension HLSCacheSettings {
    /// The cache directory: `cache.dir`, else `$XDG_CACHE_HOME/hlscache`, else `~/.cache/hlscache`.
    package func resolvedCacheDirectory(environment: [String: String]) -> String {
        cacheDirectory ?? DefaultCacheDirectory.resolve(environment: environment)
    }

    /// `http.allowedWebOrigins` as a policy (the values were checked when they were read).
    package var webOriginPolicy: WebOriginPolicy {
        (try? WebOriginPolicy(parsing: allowedWebOrigins)) ?? .default
    }

    package func proxyConfiguration(environment: [String: String]) -> ProxyConfiguration {
        var configuration = ProxyConfiguration(cacheDirectory: resolvedCacheDirectory(environment: environment))
        configuration.host = listen.host
        configuration.port = listen.port
        configuration.maxCacheBytes = maxCacheBytes
        configuration.freeDiskCushion = freeDiskCushion
        configuration.volatileQueryParameters = volatileQueryParameters
        configuration.webOrigins = webOriginPolicy
        configuration.serverNames = ServerBaseURL(serverNames: serverNames)
        configuration.maxPlaylistBytes = maxPlaylistBytes
        configuration.strictPlaylists = strictPlaylists
        configuration.liveTTLFactor = liveTTLFactor
        configuration.liveRewindWindow = Self.seconds(liveRewindWindow)
        configuration.prefetchSegments = prefetchSegments
        configuration.prefetchThrough = prefetchThrough
        configuration.maxConnections = maxConnections
        configuration.idleTimeout = Self.timeAmount(idleTimeout)
        configuration.requestHeadTimeout = Self.timeAmount(requestHeadTimeout)
        configuration.requestBodyTimeout = Self.timeAmount(requestBodyTimeout)
        configuration.sendTimeout = Self.timeAmount(sendTimeout)
        configuration.maxHeaderCount = maxHeaderCount
        configuration.sendSliceBytes = sendSliceBytes
        configuration.maxInFlightBufferBytes = inFlightBufferBytes
        configuration.maxInFlightMemoryBytes = inFlightMemoryBytes
        configuration.maxObjectBytes = maxObjectBytes
        configuration.sliceSize = sliceSize
        configuration.memoryCacheBytes = memoryCacheBytes ?? MemoryTierSizing.machineDefault
        configuration.memoryMaxObjectBytes = memoryMaxObjectBytes
        configuration.memoryLargeSends = memoryLargeSends
        configuration.memoryColdSends = memoryColdSends
        configuration.accessLog = accessLog
        configuration.metricsEnabled = metricsEnabled
        configuration.shutdownGrace = shutdownGrace
        return configuration
    }

    /// The origin client's settings. `serve`'s proxy client uses them as they are; download clients pass
    /// `retries: 0` because the downloader retries each resource itself (`downloads.attempts`).
    package func originConfiguration(retries: Int? = nil) -> OriginConfiguration {
        var configuration = OriginConfiguration()
        configuration.connectTimeout = Self.timeAmount(originConnectTimeout)
        configuration.readTimeout = Self.timeAmount(originReadTimeout)
        configuration.maxConnectionsPerHost = originMaxConnectionsPerHost
        configuration.connectionWaitTimeout = Self.timeAmount(originConnectionWaitTimeout)
        configuration.maxRedirects = originMaxRedirects
        configuration.retry = OriginRetryPolicy(
            maxRetries: retries ?? originRetries, baseDelay: Self.timeAmount(originRetryBaseDelay),
            maxDelay: Self.timeAmount(originRetryMaxDelay))
        if !originAllowedHosts.isEmpty {
            configuration.destinationPolicy.allowedHosts = originAllowedHosts.map { $0.lowercased() }
        }
        configuration.destinationPolicy.allowLoopback = originAllowLoopback
        configuration.destinationPolicy.allowPrivateNetworks = originAllowPrivateNetworks
        configuration.destinationPolicy.allowLinkLocal = originAllowLinkLocal
        configuration.destinationPolicy.allowCloudMetadata = originAllowCloudMetadata
        if let originProxy, let proxy = try? UpstreamProxyAddress(parsing: originProxy) {
            switch proxy.kind {
            case .http:
                configuration.proxy = .server(
                    host: proxy.host, port: proxy.port,
                    authorization: proxy.username.map { .basic(username: $0, password: proxy.password ?? "") })
            case .socks5:
                configuration.proxy = .socksServer(host: proxy.host, port: proxy.port)
            }
        }
        configuration.extraTrustRootsFile = originCAFile
        if let originUserAgent { configuration.userAgent = originUserAgent }
        configuration.keepsCookies = originKeepCookies
        for (host, origin) in origins {
            if !origin.headers.isEmpty { configuration.originHeaders[host] = origin.headers.map { ($0.name, $0.value) } }
            if !origin.cookies.isEmpty { configuration.originCookies[host] = origin.cookies.map { ($0.name, $0.value) } }
        }
        return configuration
    }

    package func keyConfiguration() -> KeyConfiguration {
        var configuration = KeyConfiguration()
        configuration.ttl = keyTTL
        configuration.access = KeyAccessPolicy(allowedNetworks: keysAllow.compactMap(IPNetwork.init))
        configuration.autoRenewBefore = keyAutoRenewBefore
        configuration.volatileQueryParameters = volatileQueryParameters
        return configuration
    }

    package func downloaderConfiguration() -> DownloaderConfiguration {
        var configuration = DownloaderConfiguration()
        configuration.resourcesPerItem = downloadResourcesPerItem
        configuration.concurrentItems = downloadConcurrentItems
        configuration.attempts = downloadAttempts
        configuration.retryBaseDelay = downloadRetryBaseDelay
        configuration.retryMaxDelay = downloadRetryMaxDelay
        configuration.bytesPerSecond = downloadRateLimit
        configuration.keepFilesOnExpiry = keepFilesOnExpiry
        configuration.defaultSeconds = downloadDefaultSeconds
        configuration.autoPurgeExpired = downloadAutoPurge
        configuration.idleRetryInterval = downloadIdleRetryInterval
        configuration.idleRetryMaxInterval = downloadIdleRetryMaxInterval
        configuration.maxPlaylistBytes = maxPlaylistBytes
        configuration.strictPlaylists = strictPlaylists
        configuration.volatileQueryParameters = volatileQueryParameters
        configuration.sliceSize = sliceSize
        configuration.policies.maxItemBytes = downloadMaxItemBytes
        configuration.policies.dailyBytes = downloadDailyLimit
        configuration.policies.window = downloadWindow.flatMap(DownloadWindow.init(parsing:))
        configuration.policies.itemBytesPerSecond = downloadItemRate
        return configuration
    }

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
