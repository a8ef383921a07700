import HLSCacheCore
import HLSCacheStore
import NIOCore

/// Everything `hlscache serve` can be told. Defaults are the documented ones (docs/configuration.md).
package struct ProxyConfiguration: Sendable {
    package var host: String = "127.0.0.1"
    package var port: Int = 8080
    package var cacheDirectory: String
    /// Size cap of the disk cache (default 10 GiB).
    package var maxCacheBytes: Int64 = 10 << 30
    /// Free space to leave on the cache's file system (default 100 MiB).
    package var freeDiskCushion: Int64 = 100 << 20
    /// Query parameters left out of cache keys (signed-URL tokens).
    package var volatileQueryParameters: [String] = CacheKey.defaultVolatileParameters
    /// The web pages allowed to read content (CORS), keys and the admin API (`http.allowedWebOrigins`).
    package var webOrigins: WebOriginPolicy = .default
    /// Names (`name` or `name:port`) a request's `Host` may give this server by, besides the address it was reached
    /// at, for the absolute URLs of channel lists (`http.serverNames`, ``ServerBaseURL``).
    package var serverNames = ServerBaseURL()
    /// Playlists larger than this are refused (502 `corrupted`).
    package var maxPlaylistBytes: Int = 16 << 20
    /// Refuse (502 `corrupted`) every playlist that departs from RFC 8216 (`playlists.strict`). Default false: the
    /// serve path reads playlists as players do and counts each tolerance as a warning (docs/playlist-engine.md).
    package var strictPlaylists: Bool = false
    /// A live playlist is cached for `targetDuration × liveTTLFactor` seconds (at most half the target duration).
    package var liveTTLFactor: Double = 0.5
    /// `live.rewindWindow`, seconds: live segments stored are kept this long after their playlist stops listing them,
    /// and `/rewind/…` serves the playlist extended backwards by them (0: off).
    package var liveRewindWindow: Double = 0
    /// Simultaneous client connections; more are closed at once.
    package var maxConnections: Int = 4096
    /// A connection with no request in progress is closed after this long.
    package var idleTimeout: TimeAmount = .seconds(60)
    /// A request head must arrive completely within this time of its first byte (slowloris).
    package var requestHeadTimeout: TimeAmount = .seconds(10)
    /// While a request body is expected, a connection that sends none of it for this long is closed.
    package var requestBodyTimeout: TimeAmount = .seconds(10)
    /// While response bytes wait to be sent, a client that takes none of them for this long is disconnected
    /// (nginx's `send_timeout`).
    package var sendTimeout: TimeAmount = .seconds(60)
    /// Requests with more header fields than this get 431.
    package var maxHeaderCount: Int = 100
    /// Body bytes of one in-flight download held in memory (`limits.inFlightBuffer`): what its cache file has not
    /// written yet (without a cache file: what its slowest client has not taken). Past it the origin waits; clients
    /// that join late or fall behind read the growing cache file.
    package var maxInFlightBufferBytes: Int = 4 << 20
    /// Body bytes all in-flight downloads hold in memory together (`limits.inFlightMemory`); past it, origin reads
    /// wait until some are let go.
    package var maxInFlightMemoryBytes: Int64 = 256 << 20
    /// Largest object stored (`cache.maxObjectSize`): larger ones, and bodies without a length that grow past it,
    /// are relayed but not cached; a download whose clients all left completes only when it has a length within it.
    package var maxObjectBytes: Int64 = 2 << 30
    /// Slice size of large objects (`cache.sliceSize`): objects of more than 8 slices are fetched and stored as
    /// slices when asked for by range (docs/architecture.md, "Slices").
    package var sliceSize: Int64 = SliceLayout.defaultSliceSize
    /// Bytes of hot objects held in memory to answer hits without reading their files (`cache.memorySize`; 0
    /// disables the memory tier; by default sized from the machine, ``MemoryTierSizing``).
    package var memoryCacheBytes: Int = MemoryTierSizing.machineDefault
    /// Larger objects never enter the memory tier (`cache.memoryMaxObjectSize`).
    package var memoryMaxObjectBytes: Int = 4 << 20
    /// Bodies over 64 KiB go from the memory tier while fewer than this many other connections hold one (from memory
    /// or from its file) they have not asked again since (`cache.memoryLargeSends`); past it they take their file
    /// (sendfile). 0: they always do.
    package var memoryLargeSends: Int = 8
    /// On an event loop other connections share, a large body goes from memory only while its copy is warm: fewer
    /// than this many bytes of other large bodies were sent (from memory or file) since it last went from memory
    /// (``MemoryTier/warmBytes``).
    package var memoryWarmBytes: Int = MemoryTier.defaultWarmBytes
    /// How a cold large copy is sent (`cache.memoryColdSends`): by the load (``ColdSendMode/auto``), or always one way.
    package var memoryColdSends: ColdSendMode = .auto
    /// Request heads each event loop remembers with their answers at most (``ReplayedExchanges``); tests make it small.
    package var replayedHeadsPerLoop: Int = ReplayedExchanges.defaultMaxEntries
    /// The memory each event loop's remembered heads may take; nil: a share of 4 MiB by the number of loops
    /// (``ReplayedExchanges/bytesPerLoop(loops:)``).
    package var replayedHeadBytesPerLoop: Int? = nil
    /// The clock the memory tier times its file re-checks by (``MemoryTier/recheckInterval``); tests move it.
    package var memoryTierClock: @Sendable () -> NIODeadline = { .now() }
    /// The clock the client connection timeouts (head, body, send, idle) are measured by; tests move it.
    package var connectionClock: @Sendable () -> NIODeadline = { .now() }
    /// The clock live playlists' memory TTL and `max-age` are measured by; tests move it.
    package var livePlaylistClock: @Sendable () -> NIODeadline = { .now() }
    /// Response bodies longer than this are written a slice at a time between the event loop's other I/O
    /// (`limits.sendSlice`; 0: whole bodies at once; ``LoopYield``). 2 MiB, nginx's `sendfile_max_chunk`: each slice
    /// costs a wait for the kernel to take the last one and a round of the loop, and cutting 2 MiB segments into
    /// 512 KiB slices cost more CPU per hit (385 against 233 µs) than it gave the playlists sharing the loop — those
    /// went *faster* without (docs/benchmarks.md, issue 39).
    package var sendSliceBytes: Int = 2 << 20
    /// Told on the event loop each time response body bytes are handed to a connection: the request's target, and
    /// whether they were the body's last (a large body goes a slice at a time). Tests see the order of writes on a
    /// loop with it.
    package var bodyWriteObserver: (@Sendable (_ target: String, _ last: Bool) -> Void)?
    /// Told on the event loop each time a body is sent straight to the socket (``ConnectionSocket``): the
    /// request's target, the response bytes (head and body) the kernel took at once, and all of them (the rest went
    /// through the channel). Tests see which path a body took with it.
    package var directSendObserver: (@Sendable (_ target: String, _ sentAtOnce: Int64, _ total: Int64) -> Void)?
    /// Segments fetched ahead of a player in the rendition it is playing (0 disables read-ahead).
    package var prefetchSegments: Int = 3
    /// `prefetch.through`: a fleet's balancer (`scheme://authority`) that read-ahead requests segments through, so
    /// each lands on the node the balancer hashes it to; nil: read-ahead fetches from the origin itself.
    package var prefetchThrough: String?
    /// One access-log line per request at `info` on the `hlscache.access` logger (`log.access`).
    package var accessLog: Bool = true
    /// Whether `/metrics` answers (`metrics.enabled`); counting goes on either way, it costs next to nothing.
    package var metricsEnabled: Bool = true
    /// On SIGTERM/SIGINT, responses in flight get this long to finish before their connections are closed
    /// (`shutdown.grace`).
    package var shutdownGrace: Duration = .seconds(10)
    /// A connection accepted but not yet asked anything when the server begins to drain (a player that connected in
    /// the instant of a take-over, or one that opened its connection ahead) is left this long for its first request,
    /// which is answered with `Connection: close`; then closed. Bounded by ``shutdownGrace`` as everything else.
    package var drainFirstRequestWindow: TimeAmount = .seconds(2)

    /// How the listening socket shares its address with another server (an upgrade; docs/operations.md#upgrade).
    package enum ListenSharing: Sendable {
        /// A plain socket: nobody else may bind the address while it listens.
        case exclusive
        /// `SO_REUSEPORT`, so a later server of the same user can start beside this one; an address another socket
        /// already listens on is still refused (checked with a plain bind first).
        case shareable
        /// `SO_REUSEPORT`, joining the server that listens on the address (`serve --take-over`).
        case join
    }
    /// `serve` makes its socket ``ListenSharing/shareable``; tests keep it exclusive.
    package var listenSharing: ListenSharing = .exclusive

    package init(cacheDirectory: String) {
        self.cacheDirectory = cacheDirectory
    }
}
