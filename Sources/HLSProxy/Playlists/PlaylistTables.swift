import HLSCacheCore
import HLSPlaylist
import NIOCore

/// The in-memory tables of ``PlaylistService``, behind its one lock: each is a ``BoundedLRU`` sized by
/// ``PlaylistService/TableLimits``, each entry small, each use a lookup or an insert.
struct PlaylistTables {
    /// Live playlists (and live ones that ended) served from memory until they expire.
    var live: BoundedLRU<CacheKey, (playlist: RewrittenPlaylist, expires: NIODeadline)>
    /// Media playlists this process has served live: when one ends (EXT-X-ENDLIST) it is still not kept on disk.
    var seenLive: BoundedLRU<CacheKey, Bool>
    /// The tokens (``CacheKey/volatileSignature(_:volatileParameters:)``) of the request each stored playlist was
    /// fetched for by this process (a digest of them is stored with the playlist too, for after a restart). An
    /// origin may write the viewer's token into the URIs of the playlist it returns (Wowza, token-propagating CDNs):
    /// a player coming with a new token gets a playlist fetched with it, not the one stored for an earlier, perhaps
    /// expired, token. Unknown (a prewarmed playlist): the stored one is served, as always.
    var fetchedFor: BoundedLRU<CacheKey, String>
    /// The variables of the multivariant playlists this process rewrote, by the cache key of each playlist they
    /// name: a media playlist's `EXT-X-DEFINE:IMPORT` takes its value from there (RFC 8216bis §4.4.2.3). Unknown
    /// (a restart, a player asking for a media playlist directly), the URI stays as written for the player to
    /// substitute from the multivariant playlist it has.
    var importsByPlaylist: BoundedLRU<CacheKey, [String: String]>
    /// How long each media resource named by a live playlist may be kept once stored, by cache key: the live window
    /// plus two target durations, after which no player asks for it (it left every playlist). An encoder that
    /// restarts and reuses its segment names (ffmpeg numbers from 0 again) is then never answered with the previous
    /// run's pictures, and a live stream does not fill the cache with segments nobody will ask for again. EVENT
    /// playlists keep everything (their segments stay listed).
    var liveLifetimes: BoundedLRU<CacheKey, Double>
    /// The playlist URLs (cache keys) whose warnings this process logged and counted, each kind once per URL: a
    /// live playlist reloaded every two seconds is not a new warning each time.
    var warned: BoundedLRU<String, Bool>
    /// The request headers IPTV channel lists name (`#EXTVLCOPT:http-user-agent=…`, `http-referrer=…`), by origin
    /// URL without its query: a channel's own URL, and every URL of the playlists reached from it (variants,
    /// renditions, segments, keys), learnt as each playlist is served. The origin client adds them to the requests
    /// for those URLs (``OriginClient/setHeaderSource(_:)``). Kept in the index too, sealed under the master key, and
    /// read back at start: after a restart a player asking for a channel's playlist or segment directly still gets
    /// them sent.
    var channelHeaderTable: BoundedLRU<String, [(String, String)]>
    /// Rows written since the table on disk was last trimmed to ``PlaylistService/TableLimits/channelHeaderURLs``.
    var channelHeaderWrites = 0
    /// The channel URLs of the channel lists served: a body of unknown length at one of them is a live stream,
    /// relayed and never stored (``SharedFetchStateMachine``). Bounded; kept in the index's channel table too, so a
    /// player coming back to a channel after a restart, without the list, is not stored either.
    var channelURLs: BoundedLRU<String, Bool>
    /// With `live.rewindWindow`: what each live media playlist listed, as written, for `/rewind/…`
    /// (``LiveRewind``). Bounded in playlists (``PlaylistService/TableLimits/rewindPlaylists``) and in segments each
    /// (``PlaylistService/TableLimits/rewindSegments``), whatever the window.
    var rewinds: BoundedLRU<CacheKey, LiveRewind>

    /// The live playlist in memory for `key` if it has not expired (`now` is read only if there is one); an expired
    /// one is dropped.
    mutating func livePlaylist(_ key: CacheKey, now: () -> NIODeadline) -> RewrittenPlaylist? {
        guard let entry = live.value(forKey: key) else { return nil }
        guard entry.expires > now() else {
            live.removeValue(forKey: key)
            return nil
        }
        return entry.playlist
    }

    /// The tokens the stored playlist for `key` was fetched for by this process, if known.
    mutating func fetchedFor(_ key: CacheKey) -> String? {
        fetchedFor.value(forKey: key)
    }

    init(limits: PlaylistService.TableLimits) {
        live = BoundedLRU(maxCount: limits.livePlaylists)
        seenLive = BoundedLRU(maxCount: limits.livePlaylists)
        fetchedFor = BoundedLRU(maxCount: limits.playlistTokens)
        importsByPlaylist = BoundedLRU(maxCount: limits.playlistTokens)
        liveLifetimes = BoundedLRU(maxCount: limits.liveResources)
        warned = BoundedLRU(maxCount: limits.warnings)
        channelHeaderTable = BoundedLRU(maxCount: limits.channelHeaderURLs)
        channelURLs = BoundedLRU(maxCount: limits.channelHeaderURLs)
        rewinds = BoundedLRU(maxCount: limits.rewindPlaylists)
    }
}
