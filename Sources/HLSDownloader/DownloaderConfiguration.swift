import HLSCacheCore
import HLSCacheStore

/// How the download engine behaves. Defaults are the documented ones (docs/fetch.md).
package struct DownloaderConfiguration: Sendable {
    /// Resources in flight per item: transfers at a time, each on a connection of its own (kept alive and reused).
    /// 16: across the internet each connection is held to what its round trip allows, and a prewarm is as fast as
    /// the transfers running in parallel (4.3 s with 4 at a time, 1.4 s with 16, on the WAN-like origin of
    /// docs/benchmarks.md); on loopback more changes nothing. Segment downloaders open 8–16 (aria2c caps `-x` at
    /// 16), a browser 6 per host; `origin.maxConnectionsPerHost` bounds everything to one host, and an origin that
    /// answers 429 or 503 gets half as many for the rest of the run (``RunCounter/pushedBack(generation:)``).
    package var resourcesPerItem: Int = 16
    /// Items downloaded at once by a scheduler (`serve`). Changed live (``Downloader/reconfigure(_:)``): raised, the
    /// next poll starts queued items; lowered, running items finish and no new one starts until fewer run.
    package var concurrentItems: Int = 2
    /// The precache length (seconds) of an item created without one: `fetch` without `--seconds`, `POST /items` without
    /// `seconds` (PCD's portal download limit); 0: the whole stream.
    package var defaultSeconds: Int = 0
    /// `downloads.autoPurge`: the scheduler removes expired items that are not locked, records included, as `rm`
    /// does (docs/fetch.md#expiry); a locked item stays listed as `expired`.
    package var autoPurgeExpired: Bool = false
    /// Bandwidth cap over all items of this process, bytes per second; `nil` = none.
    package var bytesPerSecond: Int64?
    /// Attempts per resource before the item fails.
    package var attempts: Int = 3
    /// Delay before the second attempt; doubled for each further one, times a random 50–100 %.
    package var retryBaseDelay: Duration = .milliseconds(500)
    /// The longest delay between attempts.
    package var retryMaxDelay: Duration = .seconds(10)
    /// When a run ends because the origin is unavailable (unreachable, timing out, 5xx, 408, 429 on every attempt):
    /// `true` leaves the item `idle` with the error as its reason and a next attempt (``idleRetryDelay(after:)``);
    /// `false` (`fetch --fail-fast`) fails it.
    package var waitForOrigin: Bool = true
    /// The wait before the first automatic retry of an item interrupted by an unavailable origin; doubled after
    /// each further interruption in a row, up to ``idleRetryMaxInterval``.
    package var idleRetryInterval: Duration = .seconds(5)
    /// The longest wait between two automatic retries of an interrupted item.
    package var idleRetryMaxInterval: Duration = .seconds(300)
    /// How often a running download re-reads its item's state (to notice `pause`/`rm` from another process).
    package var statePollInterval: Duration = .milliseconds(250)
    /// How often a running download records the resources it stored (and reports progress): one transaction per
    /// interval, not per resource.
    package var progressWriteInterval: Duration = .milliseconds(100)
    /// Playlists larger than this are refused (`corrupted`).
    package var maxPlaylistBytes: Int = 16 << 20
    /// Refuse playlists that depart from RFC 8216 (`playlists.strict`); by default they are read as players read
    /// them (docs/playlist-engine.md), and the plan's notes list what was tolerated.
    package var strictPlaylists: Bool = false
    /// At expiry, keep the item's segments and playlists as ordinary cache objects (unlocked, evicted by LRU like
    /// anything the proxy cached) instead of evicting them; its keys are purged either way.
    package var keepFilesOnExpiry: Bool = false
    /// Query parameters left out of cache keys (must match the proxy's).
    package var volatileQueryParameters: [String] = CacheKey.defaultVolatileParameters
    /// `hlscache fetch --through`: the hlscache (a fleet's balancer, `scheme://authority`) the origin client asks for
    /// every resource; its playlists come rewritten, and are read back as the origin's (``ServedPathRewriter``).
    package var throughServer: String?
    /// `cache.sliceSize`: a file addressed by byte ranges of more than 8 slices is stored as the slices the selected
    /// segments cover, cut as the proxy cuts them (docs/fetch.md).
    package var sliceSize: Int64 = SliceLayout.defaultSliceSize
    /// The download policies: maximum item size, daily volume, download hours, per-item rate (docs/fetch.md).
    package var policies = DownloadPolicies()

    /// The defaults.
    package init() {}

    /// The wait before the next run of an item interrupted `interruptions` times in a row (1, 2, …): the interval,
    /// doubled each time, capped; no jitter (items of one origin waking together is harmless, and the wait is shown).
    package func idleRetryDelay(after interruptions: Int) -> Duration {
        let exponent = min(max(0, interruptions - 1), 20)
        return min(idleRetryInterval * (1 << exponent), max(idleRetryInterval, idleRetryMaxInterval))
    }

    /// The delay before attempt `attempt` (2, 3, …): exponential, capped, with jitter.
    package func delay(beforeAttempt attempt: Int) -> Duration {
        let exponent = max(0, attempt - 2)
        let base = retryBaseDelay * (1 << min(exponent, 20))
        let capped = min(base, retryMaxDelay)
        return capped * Double.random(in: 0.5...1.0)
    }
}
