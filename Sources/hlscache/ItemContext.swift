import ArgumentParser
import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSConfig
import HLSDownloader
import HLSKeys
import HLSOrigin
import Logging
import NIOCore
import NIOPosix

/// What the item commands open: the cache store, the items table and a downloader over them.
struct ItemContext {
    let store: CacheStore
    let items: ItemStore
    let origin: OriginClient
    /// The key store's client (`origin`).
    let keyOrigin: OriginClient
    /// `http://` + the configured listen address: the base of printed player URLs when `--proxy` is not given.
    let listenBase: String
    let downloader: Downloader

    /// Opens the cache of `cache`; `origins` are the command's origin flags (`--upstream-proxy`, …); `onEvent`
    /// receives the downloader's events.
    /// - Parameter through: an hlscache (a fleet's balancer) every resource is requested through, at its proxy path
    ///   (keys at `/keys/{id}/…`), so each lands on the node that serves it (`fetch --through`).
    static func open(
        _ cache: CacheOptions, origins: OriginOptions? = nil, rate: Int64? = nil, failFast: Bool = false, through: OriginURL? = nil,
        onEvent: @escaping @Sendable (DownloadEvent) -> Void = { _ in }
    ) throws -> ItemContext {
        var flags = CommandLineSettings()
        try origins?.add(to: &flags)
        let configured = try cache.load(flags).settings
        // The policies stored at run time (`policy set`, PATCH /policies) win over the configuration here as in `serve`.
        let directory = configured.resolvedCacheDirectory(environment: ProcessInfo.processInfo.environment)
        let settings = (try? RuntimePolicies.load(directory: directory).applied(to: configured)) ?? configured
        let proxy = settings.proxyConfiguration(environment: ProcessInfo.processInfo.environment)
        let store: CacheStore
        do {
            store = try CacheStore.open(
                directory: proxy.cacheDirectory, maxBytes: proxy.maxCacheBytes, freeDiskCushion: proxy.freeDiskCushion)
        } catch {
            throw CacheOpenFailure.report("the cache", directory: proxy.cacheDirectory, error)
        }
        let masterKey: MasterKey
        let items: ItemStore
        do {
            masterKey = try MasterKey.load(directory: proxy.cacheDirectory, environment: ProcessInfo.processInfo.environment)
            // Item headers (cookies, tokens) are sealed under the same master key as the keys.
            items = try ItemStore(directory: proxy.cacheDirectory, masterKey: masterKey)
        } catch {
            store.close()
            throw CacheOpenFailure.report(
                error is KeyError ? "the key store" : "the items database", directory: proxy.cacheDirectory, error)
        }
        var logger = Logger(label: "hlscache.fetch")
        logger.logLevel = .error
        // The configured origin settings; the downloader retries each resource itself, so the client does not.
        let originConfiguration = settings.originConfiguration(retries: 0)
        let keyConfiguration = settings.keyConfiguration()
        let origin = OriginClient(eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: originConfiguration, logger: logger)
        let keyOrigin = origin
        var configuration = settings.downloaderConfiguration()
        if let rate { configuration.bytesPerSecond = rate }
        // The downloader maps each request of an item with `through` (DownloadItem.through) itself; this is the
        // process's default for items without their own.
        configuration.throughServer = through.map { "\($0.scheme)://\($0.authority)" }
        // `--fail-fast`: an unavailable origin fails the item instead of leaving it waiting (`idle`).
        if failFast { configuration.waitForOrigin = false }
        // Someone asked for this download now: the download hours (`downloads.window`) hold back `serve`'s background
        // downloads only; the size and daily limits apply here too.
        configuration.policies.enforcesWindow = false
        // Keys go to the same sealed key store `serve` uses, so prewarmed keys are never plain files.
        let keys: KeyService
        do throws(KeyError) {
            keys = try KeyService(
                directory: proxy.cacheDirectory, configuration: keyConfiguration, masterKey: masterKey, fetcher: keyOrigin, logger: logger)
        } catch {
            // The caller never got the clients: shut them down in the background so they are not leaked.
            Task {
                try? await origin.shutdown()
                if keyOrigin !== origin { try? await keyOrigin.shutdown() }
            }
            store.close()
            throw CacheOpenFailure.report("the key store", directory: proxy.cacheDirectory, error)
        }
        let downloader = Downloader(
            store: store, items: items, origin: origin, eventLoopGroup: MultiThreadedEventLoopGroup.singleton,
            configuration: configuration, keys: keys, logger: logger, onEvent: onEvent)
        return ItemContext(
            store: store, items: items, origin: origin, keyOrigin: keyOrigin,
            listenBase: ListenAddress(host: proxy.host, port: proxy.port).localBaseURL,
            downloader: downloader)
    }

    func close() async {
        try? await origin.shutdown()
        if keyOrigin !== origin { try? await keyOrigin.shutdown() }
        store.close()
    }

    /// Opens the context, runs `body` (a ``DownloadError`` becomes its message and exit status) and closes
    /// the context on every path (the origin client must be shut down before it is released).
    static func with(
        _ cache: CacheOptions, origins: OriginOptions? = nil, rate: Int64? = nil, failFast: Bool = false, through: OriginURL? = nil,
        onEvent: @escaping @Sendable (DownloadEvent) -> Void = { _ in }, _ body: (ItemContext) async throws -> Void
    ) async throws {
        let context = try open(cache, origins: origins, rate: rate, failFast: failFast, through: through, onEvent: onEvent)
        do {
            try await ItemCommandRunner.run { try await body(context) }
        } catch {
            await context.close()
            throw error
        }
        await context.close()
    }
}

/// Exit with the item error code on stderr: `hlscache: notFound: the origin answered 404 …`.
struct ItemFailure: Error, CustomStringConvertible {
    var error: DownloadError
    var description: String { "\(error.code): \(error.message)" }
}

extension DownloadError {
    /// The process exit status for an item that ended with this error (documented in docs/cli.md).
    var exitStatus: Int32 {
        switch code {
        case "notFound": 4
        case "cacheFull": 5
        case "corrupted": 6
        case "unknownItem": 7
        case "invalidState": 8
        case "unsupported": 9
        case "cancelled": 130
        default: 3
        }
    }
}

/// Runs an item's work and turns a ``DownloadError`` into the documented message and exit status.
enum ItemCommandRunner {
    static func run(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as DownloadError {
            ConsoleOutput.error("hlscache: \(error.code): \(error.message)")
            throw ExitCode(error.exitStatus)
        }
    }
}
