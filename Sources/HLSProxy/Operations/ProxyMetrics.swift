import HLSCacheStore
import HLSKeys
import HLSPlaylist
import NIOConcurrencyHelpers
import Prometheus

/// The server's metrics, in a registry of its own (never the process-wide `MetricsSystem`, so that many
/// servers can run in one process), exposed on `/metrics` in the Prometheus text format.
///
/// Counters on the request path are made once, for every value of their bounded labels, and picked by index:
/// counting a request is a few atomic adds, with no string built and no dictionary looked up. Gauges (cache
/// size, connections, downloads by state) are computed when `/metrics` is scraped. See docs/operations.md.
package final class ProxyMetrics: Sendable {
    /// The registry `/metrics` emits. Callers may add their own metrics to it.
    package let registry: PrometheusCollectorRegistry

    /// Statuses that get their own `status` label; any other is counted under `status="other"`.
    static let statuses: [Int] = [200, 204, 206, 304, 307, 400, 403, 404, 405, 416, 431, 500, 502, 503, 504]
    static let originErrorCodes: [String] = [
        "network", "timeout", "notFound", "http", "tooManyRedirects", "forbiddenDestination", "tooLarge", "truncated", "tls", "cancelled",
        "encoding", "corrupted", "busy", "other",
    ]
    /// Origin latency buckets (time to the response head).
    static let latencyBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]

    /// `route × (statuses + other)`.
    private let requests: [Counter]
    private let cacheResults: [Counter?]
    private let servedBytes: [Counter]
    private let originLatency: DurationHistogram
    private let originErrors: [String: Counter]
    private let activeConnections: Gauge
    private let originFetchesInFlight: Gauge
    private let inFlightBytes: Gauge
    private let cacheBytesUsed: Gauge
    private let cacheBytesCap: Gauge
    private let cacheObjects: Gauge
    private let memoryTierBytes: Gauge
    private let memoryTierObjects: Gauge
    private let memoryTierCapacity: Gauge
    private let memoryTierReads: Counter
    private let memoryLargeSends: Gauge
    /// Per way (memory, file): cold large bodies sent (``ColdSendMode``).
    private let coldSends: [Counter]
    private let keyFetches: Counter
    private let keyFetchFailures: Counter
    private let keyExpiries: Counter
    /// Indexed by the position of a ``PlaylistWarning/Kind`` in `allCases`.
    private let playlistWarnings: [Counter]
    private let cacheDiskFree: Gauge
    /// Indexed by ``CacheWriteFailure``.
    private let cacheWriteFailures: [Counter]
    private let originConnectionWaits: Counter
    private let originRequestsWaiting: Gauge
    private let acceptBackoffs: Counter
    private let descriptorRefusals: Counter
    /// What ``update(_:)`` keeps from one snapshot to the next (it turns running totals into counter increments).
    private struct Previous {
        var connectionWaits = 0
        var memoryTierReads = 0
        var coldFromMemory = 0
        var coldFromFile = 0
        var keyStatistics = KeyStatistics()
        var downloadStates: [String: Gauge] = [:]
    }

    private let previous = NIOLockedValueBox(Previous())
    private let itemEvictions: Counter
    /// Indexed by ``WebhookOutcome``.
    private let webhookOutcomes: [Counter]
    /// What the request path counts (``record(route:status:cache:bytes:shard:)``), per event loop: `requests`, then
    /// `cacheResults` (from ``cacheResultsBase``), then `servedBytes` (from ``servedBytesBase``), in their orders.
    /// Added into those Prometheus counters when the metrics are read (``emit()``).
    private let counts: ShardedCounts
    private var cacheResultsBase: Int { requests.count }
    private var servedBytesBase: Int { requests.count + CacheResult.allCases.count }
    /// How much of each of `counts` the Prometheus counters have been given.
    private let added: NIOLockedValueBox<[Int64]>

    /// What was served so far, from the cache and from the origin (the admin API's last-hour history samples it).
    package var traffic: TrafficTotals {
        var totals = TrafficTotals()
        for result in CacheResult.allCases {
            switch result.source {
            case .disk, .memory: totals.requestsFromCache += counts.total(cacheResultsBase + result.rawValue)
            case .origin: totals.requestsFromOrigin += counts.total(cacheResultsBase + result.rawValue)
            case nil: break
            }
        }
        for source in ByteSource.allCases {
            switch source {
            case .disk, .memory: totals.bytesFromCache += counts.total(servedBytesBase + source.rawValue)
            case .origin: totals.bytesFromOrigin += counts.total(servedBytesBase + source.rawValue)
            }
        }
        return totals
    }

    package init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "hlscache", metricName: metric, unitName: unit, helpText: help)
        }
        let requestName = name("http_requests", "total", "Requests answered, by route and status.")
        var requests: [Counter] = []
        for route in RequestRoute.allCases {
            for status in Self.statuses.map(String.init) + ["other"] {
                requests.append(registry.makeCounter(descriptor: requestName, labels: [("route", route.label), ("status", status)]))
            }
        }
        self.requests = requests
        let cacheName = name("cache_requests", "total", "Proxied resources answered, by where the answer came from.")
        self.cacheResults = CacheResult.allCases.map { result in
            result == .none ? nil : registry.makeCounter(descriptor: cacheName, labels: [("result", result.label)])
        }
        let bytesName = name("served_bytes", "total", "Body bytes of proxied resources sent to clients, by source.")
        self.servedBytes = ByteSource.allCases.map { registry.makeCounter(descriptor: bytesName, labels: [("source", $0.label)]) }
        let counted = requests.count + CacheResult.allCases.count + ByteSource.allCases.count
        self.counts = ShardedCounts(count: counted)
        self.added = NIOLockedValueBox([Int64](repeating: 0, count: counted))
        self.originLatency = registry.makeDurationHistogram(
            descriptor: name("origin_response", "seconds", "Time from an origin request to its response head (proxy fetches)."),
            labels: [], buckets: Self.latencyBuckets)
        let errorName = name("origin_errors", "total", "Origin fetches of the proxy that failed, by error code.")
        var errors: [String: Counter] = [:]
        for code in Self.originErrorCodes { errors[code] = registry.makeCounter(descriptor: errorName, labels: [("code", code)]) }
        self.originErrors = errors
        self.activeConnections = registry.makeGauge(
            descriptor: name("active_connections", "", "Open client connections."), labels: [])
        self.originFetchesInFlight = registry.makeGauge(
            descriptor: name("origin_fetches_in_flight", "", "Origin downloads of the proxy in progress (shared by coalesced clients)."),
            labels: [])
        self.inFlightBytes = registry.makeGauge(
            descriptor: name(
                "inflight", "bytes", "Body bytes of in-flight origin downloads held in memory (limits.inFlightMemory bounds them)."),
            labels: [])
        self.cacheBytesUsed = registry.makeGauge(
            descriptor: name("cache_used", "bytes", "Bytes of complete objects in the cache."), labels: [])
        self.cacheBytesCap = registry.makeGauge(descriptor: name("cache_capacity", "bytes", "The cache's size cap."), labels: [])
        self.cacheObjects = registry.makeGauge(descriptor: name("cache_objects", "", "Complete objects in the cache."), labels: [])
        self.memoryTierBytes = registry.makeGauge(
            descriptor: name("memory_tier", "bytes", "Bytes held by the memory tier (bodies and overhead; cache.memorySize bounds them)."),
            labels: [])
        self.memoryTierObjects = registry.makeGauge(
            descriptor: name("memory_tier_objects", "", "Objects held by the memory tier."), labels: [])
        self.memoryTierCapacity = registry.makeGauge(
            descriptor: name("memory_tier_capacity", "bytes", "The memory tier's bound (cache.memorySize, resolved when auto)."),
            labels: [])
        self.memoryTierReads = registry.makeCounter(
            descriptor: name(
                "memory_tier_reads", "total", "Objects read from their files into the memory tier (in the background, once admitted)."),
            labels: [])
        self.memoryLargeSends = registry.makeGauge(
            descriptor: name(
                "memory_large_sends", "",
                "Connections holding a body over 64 KiB they have not asked again since (cache.memoryLargeSends is compared with it)."),
            labels: [])
        let coldSendsName = name(
            "memory_cold_sends", "total",
            "Held bodies over 64 KiB sent while their copy was cold, by the way cache.memoryColdSends took: from memory or from the file.")
        self.coldSends = ["memory", "file"].map { registry.makeCounter(descriptor: coldSendsName, labels: [("way", $0)]) }
        self.keyFetches = registry.makeCounter(
            descriptor: name("key_fetches", "total", "Keys (AES-128, SAMPLE-AES, AES-256, …) fetched from their origin, by result."),
            labels: [("result", "ok")])
        self.keyFetchFailures = registry.makeCounter(
            descriptor: name("key_fetches", "total", "Keys (AES-128, SAMPLE-AES, AES-256, …) fetched from their origin, by result."),
            labels: [("result", "error")])
        self.cacheDiskFree = registry.makeGauge(
            descriptor: name("cache_disk_free", "bytes", "Free space on the cache's file system (statvfs), the cushion included."),
            labels: [])
        let failureName = name("cache_write_failures", "total", "Origin responses the proxy relayed but could not store, by reason.")
        self.cacheWriteFailures = CacheWriteFailure.allCases.map {
            registry.makeCounter(descriptor: failureName, labels: [("reason", $0.label)])
        }
        self.originConnectionWaits = registry.makeCounter(
            descriptor: name(
                "origin_connection_waits", "total",
                "Proxy origin requests that found every connection to their host busy and waited (origin.maxConnectionsPerHost)."),
            labels: [])
        self.originRequestsWaiting = registry.makeGauge(
            descriptor: name("origin_requests_waiting", "", "Proxy origin requests waiting for a free connection to their host."),
            labels: [])
        self.acceptBackoffs = registry.makeCounter(
            descriptor: name(
                "accept_backoffs", "total", "Times accepting client connections failed (out of file descriptors) and paused for a moment."),
            labels: [])
        self.descriptorRefusals = registry.makeCounter(
            descriptor: name(
                "descriptor_refusals", "total",
                "Client connections closed at accept because file descriptors were running low (DescriptorHeadroom)."),
            labels: [])
        self.webhookOutcomes = WebhookOutcome.allCases.map { outcome in
            registry.makeCounter(
                descriptor: name(outcome.metric, "total", outcome.help), labels: [])
        }
        self.itemEvictions = registry.makeCounter(
            descriptor: name(
                "item_evictions", "total",
                "Times the cache evicted objects of a prewarm item (size cap, free-disk cushion), in this process."),
            labels: [])
        self.keyExpiries = registry.makeCounter(
            descriptor: name(
                "key_expiries", "total", "Requests for a key fetched before and now past its expiry (then refetched or refused)."),
            labels: [])
        let warningName = name(
            "playlist_warnings", "total",
            "Playlists served although they depart from RFC 8216 as players tolerate, by kind (once per playlist URL).")
        self.playlistWarnings = PlaylistWarning.Kind.allCases.map {
            registry.makeCounter(descriptor: warningName, labels: [("kind", $0.rawValue)])
        }
    }

    // MARK: - Request path

    /// Counts one answered request. `bytes` is the body sent (0 for HEAD and 304).
    /// `shard`: the index of the event loop counting it (``ShardedCounts``).
    func record(route: RequestRoute, status: Int, cache: CacheResult, bytes: Int64, shard: Int = 0) {
        counts.add(route.rawValue * (Self.statuses.count + 1) + Self.statusIndex(status), 1, shard: shard)
        guard let source = cache.source else { return }
        counts.add(cacheResultsBase + cache.rawValue, 1, shard: shard)
        // Error bodies (JSON written by the proxy) are not content served from anywhere.
        let content = status < 400 ? bytes : 0
        if content > 0 { counts.add(servedBytesBase + source.rawValue, content, shard: shard) }
    }

    /// Gives the Prometheus counters what the request path counted since the last time.
    private func addCounts() {
        added.withLockedValue { added in
            for index in 0..<counts.count {
                let total = counts.total(index)
                let delta = total - added[index]
                guard delta > 0 else { continue }
                added[index] = total
                if index < cacheResultsBase {
                    requests[index].increment(by: delta)
                } else if index < servedBytesBase {
                    cacheResults[index - cacheResultsBase]?.increment(by: delta)
                } else {
                    servedBytes[index - servedBytesBase].increment(by: delta)
                }
            }
        }
    }

    static func statusIndex(_ status: Int) -> Int {
        switch status {
        case 200: 0
        case 204: 1
        case 206: 2
        case 304: 3
        case 307: 4
        case 400: 5
        case 403: 6
        case 404: 7
        case 405: 8
        case 416: 9
        case 431: 10
        case 500: 11
        case 502: 12
        case 503: 13
        case 504: 14
        default: 15
        }
    }

    // MARK: - Origin

    /// An origin response head arrived `elapsed` after the request started.
    func originResponded(after elapsed: Duration) {
        originLatency.record(elapsed)
    }

    /// An origin fetch failed with this error code (``HTTPMappableError/code``).
    func originFailed(code: String) {
        (originErrors[code] ?? originErrors["other"])?.increment()
    }

    // MARK: - Accepting

    /// `accept(2)` failed (`EMFILE`, `ENFILE`, …) and the listener pauses before trying again.
    func acceptBackedOff() {
        acceptBackoffs.increment()
    }

    /// A connection was closed at accept: descriptors are running low.
    func refusedForDescriptors() {
        descriptorRefusals.increment()
    }

    // MARK: - Cache writes

    enum CacheWriteFailure: Int, CaseIterable {
        /// The cap or the free-disk cushion could not be kept, or the file system is full (`cacheFull`).
        case full
        /// Any other store failure (I/O, the index).
        case error

        var label: String { self == .full ? "full" : "error" }
    }

    /// A response was relayed but not stored because the store failed with `error`. A body that did not match its
    /// `Content-Length` (`lengthMismatch`) is the origin's fault, already counted as an origin error: not counted.
    func cacheWriteFailed(_ error: any Error) {
        let store = error as? CacheStoreError
        if store == .lengthMismatch { return }
        let reason: CacheWriteFailure = store == .cacheFull ? .full : .error
        cacheWriteFailures[reason.rawValue].increment()
    }

    /// Counts an eviction that took objects of a prewarm item (the item is told: `partiallyCached` or `evicted`).
    package func itemEvicted() {
        itemEvictions.increment()
    }

    /// A webhook event delivered, given up on after its attempts, or dropped from a full queue.
    package func webhook(_ outcome: WebhookOutcome) {
        webhookOutcomes[outcome.rawValue].increment()
    }

    /// A playlist URL met with a tolerance of `kind` for the first time in this process.
    func playlistWarning(_ kind: PlaylistWarning.Kind) {
        guard let index = PlaylistWarning.Kind.allCases.firstIndex(of: kind) else { return }
        playlistWarnings[index].increment()
    }

    // MARK: - Scrape time

    /// Values computed when `/metrics` is scraped.
    struct Snapshot {
        var activeConnections: Int
        var originFetchesInFlight: Int
        var inFlightBytes: Int64 = 0
        var cacheBytes: Int64?
        var cacheObjects: Int?
        var cacheCapacity: Int64
        /// The memory tier: bytes and objects held, connections holding a large body, its bound, and the reads into it
        /// started so far.
        var memoryTier: (bytes: Int, objects: Int, largeSends: Int, capacity: Int, reads: Int) = (0, 0, 0, 0, 0)
        /// Cold large bodies sent so far from memory, and from their files (``MemoryTier/coldSendCounts``).
        var coldSends: (memory: Int, file: Int) = (0, 0)
        var diskFree: Int64?
        var keys: KeyStatistics
        var downloadStates: [String: Int]?
        /// The proxy's origin client: requests that waited for a connection so far, and waiting now.
        var originConnectionWaits: (total: Int, waiting: Int)?
    }

    /// Adds to `counter` what `total`, a running total read off the server, grew by past the largest total seen
    /// before at `key` (two scrapes racing may read their totals in either order: the counter never counts twice).
    private func advance(_ counter: Counter, to total: Int, at key: WritableKeyPath<Previous, Int>) {
        let before = previous.withLockedValue { previous in
            defer { previous[keyPath: key] = max(previous[keyPath: key], total) }
            return previous[keyPath: key]
        }
        counter.increment(by: Int64(max(0, total - before)))
    }

    func update(_ snapshot: Snapshot) {
        activeConnections.set(Int64(snapshot.activeConnections))
        originFetchesInFlight.set(Int64(snapshot.originFetchesInFlight))
        inFlightBytes.set(snapshot.inFlightBytes)
        if let bytes = snapshot.cacheBytes { cacheBytesUsed.set(bytes) }
        if let count = snapshot.cacheObjects { cacheObjects.set(Int64(count)) }
        cacheBytesCap.set(snapshot.cacheCapacity)
        memoryTierBytes.set(Int64(snapshot.memoryTier.bytes))
        memoryTierObjects.set(Int64(snapshot.memoryTier.objects))
        memoryLargeSends.set(Int64(snapshot.memoryTier.largeSends))
        memoryTierCapacity.set(Int64(snapshot.memoryTier.capacity))
        advance(coldSends[0], to: snapshot.coldSends.memory, at: \.coldFromMemory)
        advance(coldSends[1], to: snapshot.coldSends.file, at: \.coldFromFile)
        advance(memoryTierReads, to: snapshot.memoryTier.reads, at: \.memoryTierReads)
        if let free = snapshot.diskFree { cacheDiskFree.set(free) }
        if let waits = snapshot.originConnectionWaits {
            advance(originConnectionWaits, to: waits.total, at: \.connectionWaits)
            originRequestsWaiting.set(Int64(waits.waiting))
        }
        let keys = snapshot.keys
        let before = previous.withLockedValue { previous in
            defer { previous.keyStatistics = keys }
            return previous.keyStatistics
        }
        keyFetches.increment(by: max(0, keys.fetches - before.fetches))
        keyFetchFailures.increment(by: max(0, keys.fetchFailures - before.fetchFailures))
        keyExpiries.increment(by: max(0, keys.expiries - before.expiries))
        if let states = snapshot.downloadStates {
            let descriptor = MetricNameDescriptor(
                namespace: "hlscache", metricName: "downloads", unitName: "", helpText: "Prewarm items (hlscache fetch) by state.")
            previous.withLockedValue { previous in
                for (state, count) in states {
                    let gauge = previous.downloadStates[state] ?? registry.makeGauge(descriptor: descriptor, labels: [("state", state)])
                    previous.downloadStates[state] = gauge
                    gauge.set(Int64(count))
                }
                for (state, gauge) in previous.downloadStates where states[state] == nil { gauge.set(Int64(0)) }
            }
        }
    }

    /// The Prometheus text exposition of every metric.
    func emit() -> [UInt8] {
        addCounts()
        return registry.emitToBuffer()
    }
}

/// What became of one webhook event for one receiver (`hlscache_webhook_*_total`).
package enum WebhookOutcome: Int, CaseIterable, Sendable {
    case delivered, failed, dropped

    var metric: String {
        switch self {
        case .delivered: "webhook_delivered"
        case .failed: "webhook_failed"
        case .dropped: "webhook_dropped"
        }
    }

    var help: String {
        switch self {
        case .delivered: "Webhook events a receiver accepted (2xx)."
        case .failed: "Webhook events given up on after webhooks.attempts deliveries."
        case .dropped: "Webhook events dropped because the delivery queue (webhooks.queueSize) was full."
        }
    }
}
