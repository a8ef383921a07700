import ArgumentParser
import Foundation
import HLSAdmin
import HLSCacheCore
import HLSCacheStore
import HLSConfig
import HLSKeys
import HLSDownloader
import HLSOrigin
import HLSProxy
import Logging
import NIOConcurrencyHelpers
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

    @Option(name: .long, help: "Address to listen on (host:port). Default: $HLSCACHE_LISTEN or 127.0.0.1:8080 (listen).")
    var listen: String?

    @Option(
        name: .long,
        help:
            "Web page origin allowed to read content, keys and the API (repeatable): loopback, https://host[:port], null or *. Default loopback (http.allowedWebOrigins)."
    )
    var allowedWebOrigins: [String] = []

    @Option(name: .long, help: "Segments fetched ahead of a player in the rendition it plays (0 disables). Default 3 (prefetch.segments).")
    var prefetchSegments: String?

    @Option(name: .long, help: "Log level: trace, debug, info, notice, warning, error, critical. Default info (log.level).")
    var logLevel: String?

    @Flag(name: .long, help: "Print the effective configuration and where each value came from, then exit.")
    var printConfig = false

    @Option(name: .long, help: "Log format on standard error: text, or json (one JSON object per line). Default text (log.format).")
    var logFormat: String?

    @Flag(
        name: .long, inversion: .prefixedNo,
        help: "One access-log line per request (logger hlscache.access, level info). Default on (log.access).")
    var accessLog: Bool?

    @Flag(name: .long, inversion: .prefixedNo, help: "Serve Prometheus metrics on /metrics. Default on (metrics.enabled).")
    var metrics: Bool?

    @Option(
        name: .long, help: "On SIGTERM/SIGINT, how long responses in flight may take to finish, e.g. 10s. Default 10s (shutdown.grace).")
    var shutdownGrace: String?

    @Option(
        name: .long,
        help:
            "Client connections held at once; more are closed on accept (raise `ulimit -n` to match). Default 4096 (limits.maxConnections)."
    )
    var maxConnections: String?

    @Option(name: .long, help: "Bearer token the admin API (/api/v1) requires, from loopback too (YAML api.token).")
    var apiToken: String?

    @Option(name: .long, help: "Network (CIDR) allowed to use the admin API besides loopback (repeatable; YAML api.allow).")
    var apiAllow: [String] = []

    @Flag(
        name: .long,
        help:
            "Upgrade without dropping players: listen beside the running server of this cache directory (SO_REUSEPORT), then tell it to stop accepting and drain (it exits within its shutdown.grace)."
    )
    var takeOver = false

    func run() async throws {
        ConfigurationReloader.ignoreHangUp()
        var commandLine = CommandLineSettings()
        try origins.add(to: &commandLine)
        try keyOptions.add(to: &commandLine)
        commandLine.set("listen", listen)
        commandLine.set("http.allowedWebOrigins", allowedWebOrigins)
        commandLine.set("prefetch.segments", prefetchSegments)
        commandLine.set("log.level", logLevel)
        commandLine.set("log.format", logFormat)
        commandLine.set("log.access", accessLog.map { String($0) })
        commandLine.set("metrics.enabled", metrics.map { String($0) })
        commandLine.set("shutdown.grace", shutdownGrace)
        commandLine.set("limits.maxConnections", maxConnections)
        commandLine.set("api.token", apiToken)
        commandLine.set("api.allow", apiAllow)
        let loaded = try cache.load(commandLine)
        var reloadFlags = cache.commandLine
        reloadFlags.values.merge(commandLine.values) { $1 }
        reloadFlags.originHeaders = commandLine.originHeaders
        let settings = loaded.settings
        let environment = ProcessInfo.processInfo.environment
        if printConfig {
            ConsoleOutput.write(loaded.printableConfiguration(environment: environment))
            return
        }
        let address = settings.listen
        // Every logger's level is the process's, which a reload changes (LiveLevelLogHandler).
        LiveLevelLogHandler.setLevel(Logger.Level(rawValue: settings.logLevel) ?? .info)
        if settings.logFormat == .json {
            LoggingSystem.bootstrap { label in LiveLevelLogHandler(JSONLogHandler(label: label)) }
        } else {
            LoggingSystem.bootstrap { label in LiveLevelLogHandler(StreamLogHandler.standardError(label: label)) }
        }
        let logger = Logger(label: "hlscache")

        // Buffers of 1 MiB or more (a large playlist's copies) go back to the system when freed (MemoryTrim).
        MemoryTrim.mapAllocations(from: 1 << 20)
        var configuration = settings.proxyConfiguration(environment: environment)
        // Descriptors: the soft limit goes up to the hard one, and client connections stay below what it leaves once
        // cache files, origin sockets and SQLite have theirs, so a flood of idle connections is refused at accept
        // rather than starving the server of descriptors.
        let descriptorLimit = DescriptorLimit.raiseToHard()
        // Too few to serve anyone: said now, before parts that cannot fail politely run out (exit 78).
        if let limit = descriptorLimit, let line = DescriptorLimit.tooLowToServe(soft: limit.soft, lowestFree: nil, extra: 0) {
            ConsoleOutput.error("hlscache: config error: \(line) (docs/operations.md#file-descriptors)")
            throw ExitCode(78)
        }
        if let limit = descriptorLimit {
            if let before = limit.raisedFrom {
                logger.info("file descriptor limit raised from \(before) to \(limit.soft) (the hard limit)")
            }
            let allowed = limit.maxConnections(configured: configuration.maxConnections)
            if allowed < configuration.maxConnections {
                logger.notice(
                    "limits.maxConnections lowered from \(configuration.maxConnections) to \(allowed): the file descriptor limit is \(limit.soft) (ulimit -n), \(DescriptorLimit.reserve(for: limit.soft)) of them kept for cache files and origin connections"
                )
                configuration.maxConnections = allowed
            }
        }
        // The socket can be shared, so the next version can start beside this one (`--take-over`).
        configuration.listenSharing = .shareable
        var predecessor: pid_t?
        if takeOver {
            predecessor = ServePIDFile.runningServer(cacheDirectory: configuration.cacheDirectory)
            if predecessor != nil { configuration.listenSharing = .join }
            if predecessor == nil {
                logger.notice("--take-over: no server of \(configuration.cacheDirectory) is running; starting as usual")
            }
        }
        let originConfiguration = settings.originConfiguration()
        let keyConfiguration = settings.keyConfiguration()

        let store: CacheStore
        do {
            store = try CacheStore.open(
                directory: configuration.cacheDirectory, maxBytes: configuration.maxCacheBytes,
                freeDiskCushion: configuration.freeDiskCushion)
        } catch {
            throw CacheOpenFailure.report("the cache", directory: configuration.cacheDirectory, error)
        }
        // What startup recovery did: a repair (after a crash, a kill, a power cut) is worth a notice.
        if store.recovery.repairedAnything {
            logger.notice("\(store.recovery.summary)")
        } else {
            logger.debug("\(store.recovery.summary)")
        }
        // `http.eventLoops`: NIO's singleton has one loop per core the process may use (`auto`).
        let group = settings.eventLoops.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) } ?? .singleton
        let origin = OriginClient(eventLoopGroup: group, configuration: originConfiguration, logger: logger)
        let keys: KeyService
        let masterKey: MasterKey
        do throws(KeyError) {
            masterKey = try MasterKey.load(directory: configuration.cacheDirectory, environment: ProcessInfo.processInfo.environment)
            keys = try KeyService(
                directory: configuration.cacheDirectory, configuration: keyConfiguration, masterKey: masterKey, fetcher: origin,
                logger: logger)
        } catch {
            try? await origin.shutdown()
            store.close()
            throw CacheOpenFailure.report("the key store", directory: configuration.cacheDirectory, error)
        }
        if configuration.webOrigins.allowsAnyPage {
            logger.warning(
                "http.allowedWebOrigins includes *: any web page open in a browser on this machine can read what this server proxies, its keys (from loopback) and its admin API"
            )
        }
        var adminConfiguration = AdminConfiguration(token: settings.apiToken)
        // At a stop, event streams get what is left of theirs (`stopping` last) within the drain's grace period.
        adminConfiguration.stopWait = settings.shutdownGrace
        adminConfiguration.allowedNetworks = settings.apiAllow.compactMap(IPNetwork.init)
        // Items queued by `hlscache fetch --detach` or POST /api/v1/items (and interrupted ones) are downloaded in
        // the background with the same origin settings as the proxy's client (the downloader retries each resource
        // itself); the admin API reports their events.
        let hub = EventHub(progressInterval: adminConfiguration.progressInterval)
        let downloadOrigin = OriginClient(eventLoopGroup: group, configuration: settings.originConfiguration(retries: 0), logger: logger)
        let items: ItemStore
        do {
            items = try ItemStore(directory: configuration.cacheDirectory, masterKey: masterKey)
        } catch {
            try? await downloadOrigin.shutdown()
            try? await origin.shutdown()
            store.close()
            throw CacheOpenFailure.report("the items database", directory: configuration.cacheDirectory, error)
        }
        // The server's counters, made first: the webhook and eviction observers below count into them.
        let metrics = ProxyMetrics()
        // Webhooks: every item state change the hub announces, POSTed signed to each receiver (api.md#webhooks).
        var webhooks: WebhookNotifier?
        if !settings.webhookURLs.isEmpty {
            guard let secret = settings.webhookSecret else {
                try? await downloadOrigin.shutdown()
                try? await origin.shutdown()
                store.close()
                ConsoleOutput.error(
                    "hlscache: webhooks.urls is set but webhooks.secret is not: the receivers could not check the signatures")
                throw ExitCode(64)
            }
            var webhookConfiguration = WebhookConfiguration()
            webhookConfiguration.urls = settings.webhookURLs
            webhookConfiguration.secret = secret
            webhookConfiguration.attempts = settings.webhookAttempts
            webhookConfiguration.retryBaseDelay = settings.webhookRetryBaseDelay
            webhookConfiguration.queueSize = settings.webhookQueueSize
            webhookConfiguration.stopWait = settings.webhookStopWait
            let notifier = WebhookNotifier(
                configuration: webhookConfiguration, eventLoopGroup: group, logger: logger, outbox: items,
                onOutcome: { metrics.webhook($0) })
            notifier.follow(hub)
            webhooks = notifier
        }
        // Policies changed at run time (PATCH /api/v1/policies) win over the configuration until reset.
        let storedPolicies = ServePolicies.stored(directory: configuration.cacheDirectory, configured: settings, logger: logger)
        let downloader = Downloader(
            store: store, items: items, origin: downloadOrigin, eventLoopGroup: group,
            configuration: (try? storedPolicies.applied(to: settings))?.downloaderConfiguration() ?? settings.downloaderConfiguration(),
            keys: keys, logger: logger,
            onEvent: { event in
                hub.publish(event)
                if case .evicted = event { metrics.itemEvicted() }
            })
        let scheduler = DownloadScheduler(downloader: downloader)
        let policies = ServePolicies(
            directory: configuration.cacheDirectory, configured: settings, stored: storedPolicies, downloader: downloader)
        let admin = AdminAPI(
            configuration: adminConfiguration, downloader: downloader, keys: keys, hub: hub,
            volatileQueryParameters: configuration.volatileQueryParameters, logger: logger, wake: { Task { await scheduler.tick() } })
        admin.setPolicyControl(policies.control)
        // A segment or key an origin refuses for want of its token cookie (set on the multivariant playlist, which
        // a prewarmed stream serves from the cache) gets one from the playlist of the item it belongs to.
        let volatile = configuration.volatileQueryParameters
        let cookiePages: CookieRefresher.PageSource = { url in
            let key = CacheKey(url, volatileParameters: volatile).value
            let origin = "\(url.scheme)://\(url.authority)"
            let found = try? await NIOThreadPool.singleton.runIfActive { try? items.topURL(forResource: key, origin: origin) }
            return found.flatMap { $0 }.flatMap { try? OriginURL($0) }
        }
        let server = ProxyServer(
            configuration: configuration, store: store, origin: origin, keys: keys, group: group, threadPool: NIOThreadPool.singleton,
            logger: logger, metrics: metrics, routeExtension: admin, cookiePages: cookiePages)
        // Everything but the listener, the signal handlers and the live-share client is open now: the table must
        // still leave room for a connection beside the headroom kept free (DescriptorHeadroom).
        if let limit = descriptorLimit,
            let line = DescriptorLimit.tooLowToServe(
                soft: limit.soft, lowestFree: DescriptorHeadroom.lowestFree(), extra: DescriptorLimit.openedAfterCheck)
        {
            try? await downloadOrigin.shutdown()
            try? await origin.shutdown()
            store.close()
            ConsoleOutput.error("hlscache: config error: \(line) (docs/operations.md#file-descriptors)")
            throw ExitCode(78)
        }
        let bound: SocketAddress
        do {
            bound = try await server.start()
        } catch {
            try? await downloadOrigin.shutdown()
            try? await origin.shutdown()
            store.close()  // a clean close: the next start needs no recovery pass
            // Not a bad option (ArgumentParser's usage text and 64): the address is taken or not ours to bind.
            ConsoleOutput.error("hlscache: cannot listen on \(address): \(error)")
            throw ExitCode(71)
        }
        if let ip = bound.ipAddress, let port = bound.port { downloadOrigin.addOwnListener(host: ip, port: port) }
        // `started`: to the webhooks now, and first on every event stream of this run (docs/api.md#events).
        hub.serverStarted(ServerStatus(phase: .started, startedAt: Date(), pid: getpid(), version: HLSCacheVersion.current))
        // Live recordings request their segments through this server's own proxy, so a viewer and a recording share
        // one origin request per segment (docs/fetch.md#live); a client of its own, straight to the listener.
        var shareConfiguration = OriginConfiguration()
        shareConfiguration.retry = OriginRetryPolicy(maxRetries: 0)
        shareConfiguration.destinationPolicy.allowLoopback = true
        shareConfiguration.destinationPolicy.allowPrivateNetworks = true
        shareConfiguration.readTimeout = settings.originConfiguration().readTimeout
        shareConfiguration.keepsCookies = false
        let shareOrigin = OriginClient(eventLoopGroup: group, configuration: shareConfiguration, logger: logger)
        if let ip = bound.ipAddress, let port = bound.port {
            let host = ip == "0.0.0.0" ? "127.0.0.1" : ip == "::" ? "[::1]" : ip.contains(":") ? "[\(ip)]" : ip
            downloader.shareLiveFetches(through: "http://\(host):\(port)", client: shareOrigin)
        }
        // SIGHUP: the config file and the environment read again, what can change live applied (docs/operations.md#reload).
        let reloader = ConfigurationReloader(
            configFile: loaded.configFile, commandLine: reloadFlags, running: settings, logger: logger,
            status: { admin.updateConfigurationStatus($0) },
            apply: { plan, configured in
                let (new, policiesChanged) = policies.reloaded(configured)
                if policiesChanged {
                    await policies.applyReloaded(new) { hub.send(.policy(policies: $0.policies)) }
                    await scheduler.tick()
                }
                await ServeReload.apply(
                    plan, new,
                    to: ServeReload.Targets(
                        downloader: downloader, keys: keys, admin: admin, server: server, origins: [origin, downloadOrigin],
                        wake: { Task { await scheduler.tick() } }))
            })
        let hangUps = reloader.listen()
        defer { hangUps.cancel() }
        ServePIDFile.write(cacheDirectory: configuration.cacheDirectory)
        defer { ServePIDFile.remove(cacheDirectory: configuration.cacheDirectory) }
        if let predecessor {
            // Both listen now: the old server stops accepting, finishes its responses (and leaves its downloads idle,
            // which this one resumes), then exits.
            kill(predecessor, SIGTERM)
            logger.notice("took over \(address) from pid \(predecessor): it stops accepting and drains (shutdown.grace) before it exits")
        }
        let banner = ServeBanner(
            line:
                "hlscache \(HLSCacheVersion.current) serving on http://\(address.host.contains(":") ? "[\(address.host)]" : address.host):\(bound.port ?? address.port) (cache \(configuration.cacheDirectory))"
        )
        // On a signal the group stops its services in reverse order: the banner, the admin API (its event streams
        // get `stopping` and end first), the proxy (stop accepting, drain for up to the grace period), then the downloads (items
        // become idle, resumable), then key renewal.
        // The webhooks stop last: `stopping` and the state changes of the drain (items becoming idle) still go out
        // while they can (at most `webhooks.stopWait`, then the outbox keeps them).
        var running: [any Service] = webhooks.map { [$0] } ?? []
        if let before = keyConfiguration.autoRenewBefore {
            running.append(KeyRenewalService(keys: keys, before: before))
        }
        server.setDownloadStateProvider { try items.countsByState() }
        running.append(DownloadSchedulerService(scheduler: scheduler))
        running.append(ProxyService(server: server, gracePeriod: settings.shutdownGrace))
        running.append(admin)
        let services = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: running + [banner], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await services.run()
        logger.info("hlscache stopped: connections drained, downloads paused, closing the cache")
        try? await shareOrigin.shutdown()
        try? await downloadOrigin.shutdown()
        try? await origin.shutdown()
        store.close()
    }
}

/// Options shared by every command that touches the cache: the same `--config` and `--cache-dir` as `serve`,
/// so `fetch` and a running `serve` share one cache and one configuration.
struct CacheOptions: ParsableArguments {
    @Option(name: .long, help: SettingsOptions.configHelp)
    var config: String?

    @Option(name: .long, help: "Cache directory (cache.dir). Default: $HLSCACHE_CACHE_DIR, $XDG_CACHE_HOME/hlscache or ~/.cache/hlscache.")
    var cacheDir: String?

    @Option(name: .long, help: "Size cap of the cache, e.g. 10GiB or 500MB. Default 10GiB (cache.maxSize).")
    var maxCacheSize: String?

    @Option(name: .long, help: "Free disk space to leave on the cache's file system. Default 100MiB (cache.freeDiskCushion).")
    var freeDiskCushion: String?

    /// The flags given, as settings.
    var commandLine: CommandLineSettings {
        var settings = CommandLineSettings()
        settings.set("cache.dir", cacheDir)
        settings.set("cache.maxSize", maxCacheSize)
        settings.set("cache.freeDiskCushion", freeDiskCushion)
        return settings
    }

    /// The layered settings with these flags and `more` (other flags of the command).
    func load(_ more: CommandLineSettings = CommandLineSettings()) throws -> LoadedSettings {
        var flags = commandLine
        flags.values.merge(more.values) { $1 }
        flags.originHeaders += more.originHeaders
        return try SettingsOptions.load(configFile: config, commandLine: flags)
    }
}
