import ArgumentParser
import Foundation
import HLSAdmin
import HLSCacheCore
import HLSCacheStore
import HLSKeys
import HLSDownloader
import HLSOrigin
import HLSProxy
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// `hlscache serve`: the proxy and cache server.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HLS proxy and cache server.",
        discussion: "Point a player at http://LISTEN/https/cdn.example.com/path/master.m3u8 (see `hlscache url`)."
    )

    @OptionGroup var cache: CacheOptions
    @OptionGroup var origins: OriginOptions
    @OptionGroup var keyOptions: KeyOptions

    @Option(name: .long, help: "Address to listen on (host:port). Default 127.0.0.1:8080.")
    var listen: String = "127.0.0.1:8080"

    @Option(name: .long, help: "Access-Control-Allow-Origin value; 'none' disables CORS headers.")
    var corsOrigin: String = "*"

    @Option(name: .long, help: "Segments fetched ahead of a player in the rendition it plays (0 disables).")
    var prefetchSegments: Int = 3

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(name: .long, help: "Bearer token the admin API (/api/v1) requires, from loopback too (YAML api.token).")
    var apiToken: String?

    @Option(name: .long, help: "Network (CIDR) allowed to use the admin API besides loopback (repeatable; YAML api.allow).")
    var apiAllow: [String] = []

    func run() async throws {
        guard let address = ListenAddress(listen) else {
            throw ValidationError("--listen \(listen): expected host:port, e.g. 127.0.0.1:8080")
        }
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level \(logLevel): expected one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        var logger = Logger(label: "hlscache")
        logger.logLevel = level

        var configuration = try cache.proxyConfiguration()
        configuration.host = address.host
        configuration.port = address.port
        guard !corsOrigin.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw ValidationError("--cors-origin must be a single header value")
        }
        configuration.corsAllowOrigin = corsOrigin == "none" ? nil : corsOrigin
        guard (0...64).contains(prefetchSegments) else { throw ValidationError("--prefetch-segments must be between 0 and 64") }
        configuration.prefetchSegments = prefetchSegments
        let originConfiguration = try origins.originConfiguration()
        var keyConfiguration = try keyOptions.keyConfiguration()
        keyConfiguration.volatileQueryParameters = configuration.volatileQueryParameters

        let store: CacheStore
        do {
            store = try CacheStore.open(
                directory: configuration.cacheDirectory, maxBytes: configuration.maxCacheBytes, freeDiskCushion: configuration.freeDiskCushion)
        } catch {
            throw ValidationError("cannot open the cache in \(configuration.cacheDirectory): \(error)")
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let origin = OriginClient(eventLoopGroup: group, configuration: originConfiguration, logger: logger)
        let keys: KeyService
        do throws(KeyError) {
            let masterKey = try MasterKey.load(directory: configuration.cacheDirectory, environment: ProcessInfo.processInfo.environment)
            keys = try KeyService(
                directory: configuration.cacheDirectory, configuration: keyConfiguration, masterKey: masterKey, fetcher: origin, logger: logger)
        } catch {
            try? await origin.shutdown()
            store.close()
            throw ValidationError("cannot open the key store in \(configuration.cacheDirectory): \(error.message)")
        }
        var adminConfiguration = AdminConfiguration(token: apiToken)
        for text in apiAllow {
            guard let network = IPNetwork(text) else { throw ValidationError("--api-allow \(text): expected a CIDR such as 192.168.1.0/24") }
            adminConfiguration.allowedNetworks.append(network)
        }
        if let apiToken, apiToken.count < 16 || apiToken.contains(where: { $0 == " " || $0 == "\r" || $0 == "\n" }) {
            throw ValidationError("--api-token: expected at least 16 characters without spaces")
        }
        // Items queued by `hlscache fetch --detach` or POST /api/v1/items (and interrupted ones) are downloaded in
        // the background; the admin API reports their events.
        let hub = EventHub(progressInterval: adminConfiguration.progressInterval)
        let downloadOrigin = OriginClient(eventLoopGroup: group, configuration: ItemContext.originConfiguration(), logger: logger)
        let items = try ItemStore(directory: configuration.cacheDirectory)
        var downloaderConfiguration = DownloaderConfiguration()
        downloaderConfiguration.volatileQueryParameters = configuration.volatileQueryParameters
        downloaderConfiguration.maxPlaylistBytes = configuration.maxPlaylistBytes
        let downloader = Downloader(
            store: store, items: items, origin: downloadOrigin, eventLoopGroup: group, configuration: downloaderConfiguration,
            keys: keys, logger: logger, onEvent: { hub.publish($0) })
        let scheduler = DownloadScheduler(downloader: downloader)
        let admin = AdminAPI(
            configuration: adminConfiguration, downloader: downloader, keys: keys, hub: hub,
            volatileQueryParameters: configuration.volatileQueryParameters, logger: logger, wake: { Task { await scheduler.tick() } })
        let server = ProxyServer(
            configuration: configuration, store: store, origin: origin, keys: keys, group: group, threadPool: NIOThreadPool.singleton,
            logger: logger, routeExtension: admin)
        let bound: SocketAddress
        do {
            bound = try await server.start()
        } catch {
            try? await downloadOrigin.shutdown()
            try? await origin.shutdown()
            throw ValidationError("cannot listen on \(address): \(error)")
        }
        print("hlscache \(HLSCacheVersion.current) serving on http://\(address.host.contains(":") ? "[\(address.host)]" : address.host):\(bound.port ?? address.port) (cache \(configuration.cacheDirectory))")
        fflush(nil)
        var running: [any Service] = [ProxyService(server: server)]
        if let before = keyConfiguration.autoRenewBefore {
            running.append(KeyRenewalService(keys: keys, before: before))
        }
        let schedulerTask = Task { await scheduler.run() }
        // Last in the group, so first to stop: its event streams close before the proxy waits for open connections.
        running.append(admin)
        let services = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: running, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await services.run()
        schedulerTask.cancel()
        await schedulerTask.value
        try? await downloadOrigin.shutdown()
        try? await origin.shutdown()
        store.close()
    }
}

/// Options shared by every command that touches the cache.
struct CacheOptions: ParsableArguments {
    @Option(name: .long, help: "Cache directory. Default: $HLSCACHE_CACHE_DIR, $XDG_CACHE_HOME/hlscache or ~/.cache/hlscache.")
    var cacheDir: String?

    @Option(name: .long, help: "Size cap of the cache, e.g. 10GiB or 500MB.")
    var maxCacheSize: String = "10GiB"

    @Option(name: .long, help: "Free disk space to leave on the cache's file system.")
    var freeDiskCushion: String = "100MiB"

    func proxyConfiguration() throws -> ProxyConfiguration {
        let directory = cacheDir ?? DefaultCacheDirectory.resolve(environment: ProcessInfo.processInfo.environment)
        var configuration = ProxyConfiguration(cacheDirectory: directory)
        guard let cap = ByteSize(maxCacheSize) else { throw ValidationError("--max-cache-size \(maxCacheSize): not a size (try 10GiB)") }
        guard let cushion = ByteSize(freeDiskCushion) else {
            throw ValidationError("--free-disk-cushion \(freeDiskCushion): not a size (try 100MiB)")
        }
        configuration.maxCacheBytes = cap.bytes
        configuration.freeDiskCushion = cushion.bytes
        return configuration
    }
}

