import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSCrypto
import HLSKeys
import HLSOrigin
import HLSPlaylist
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import Synchronization

/// A playlist as the proxy serves it: every URI pointing back through the proxy, gzip made once.
struct RewrittenPlaylist: Sendable {
    var body: ByteBuffer
    var gzip: ByteBuffer?
    /// A media playlist without EXT-X-ENDLIST: cached briefly, in memory only.
    var isLive: Bool
    /// How long a live playlist may be served from memory.
    var ttl: Double
    /// When it was made from the origin's answer (on ``ProxyConfiguration/livePlaylistClock``).
    var madeAt: NIODeadline = .now()
    /// The `Content-Type` to send: ``MediaTypes/playlist``, or the origin's for a playlist given absolute URLs.
    var contentType: String = MediaTypes.playlist
    /// Where in ``body`` the server's own `http://authority` goes, in ascending order: each URI of a playlist that
    /// needs absolute URLs (``PlaylistService/needsAbsoluteURLs(_:contentType:url:)``). Empty for the others.
    /// ``gzip`` is nil when this is not empty: the body differs with the request's `Host`.
    var baseInsertions: [Int] = []
    /// For `/rewind/…`: a live media playlist extended backwards by the segments still held from before its window
    /// (``LiveRewind``), or a multivariant playlist whose renditions point at `/rewind/…` (``RewindLinks``); nil when
    /// nothing is held or `live.rewindWindow` is off (the plain body is served).
    var rewound: ByteBuffer?
    /// The heads rendered for this version's plain answers (``PlaylistService/preparedAnswer(for:to:)``); shared by
    /// the copies of this value.
    let preparedHeads = PreparedLiveHeads()

    /// The body for a request that reached the server at `base` (`http://authority`).
    func body(base: String?) -> ByteBuffer {
        guard !baseInsertions.isEmpty, let base else { return body }
        let prefix = Array(base.utf8)
        var out = ByteBuffer()
        out.reserveCapacity(body.readableBytes + prefix.count * baseInsertions.count)
        var cursor = body.readerIndex
        for offset in baseInsertions {
            out.writeImmutableBuffer(body.getSlice(at: cursor, length: body.readerIndex + offset - cursor)!)
            out.writeBytes(prefix)
            cursor = body.readerIndex + offset
        }
        out.writeImmutableBuffer(body.getSlice(at: cursor, length: body.writerIndex - cursor)!)
        return out
    }

    /// The `Cache-Control` to send at `now`: a live playlist may be kept downstream only for what is left of its TTL
    /// (a cache in front of the proxy adding a whole TTL to a copy already nearly a TTL old would serve it stale).
    func cacheControl(at now: NIODeadline) -> String {
        maxAge(at: now).map { "max-age=\($0)" } ?? "no-cache"
    }

    /// The `max-age` of ``cacheControl(at:)`` (nil: `no-cache`, not live).
    func maxAge(at now: NIODeadline) -> Int? {
        guard isLive else { return nil }
        let elapsed = Double((now - madeAt).nanoseconds) / 1e9
        return max(0, Int((ttl - elapsed).rounded()))
    }
}

/// Rewrites playlists for the proxy and keeps them: VOD and multivariant playlists in the disk cache (raw,
/// rewritten and gzipped), live playlists in memory for at most `targetDuration × liveTTLFactor`.
final class PlaylistService: Sendable {
    let configuration: ProxyConfiguration
    let store: CacheStore
    private let keys: KeyService
    let logger: Logger
    private let metrics: ProxyMetrics
    private let writeFailures: CacheWriteFailureLog
    let readAhead: ReadAheadIndex
    /// The bounds of the tables below.
    let limits: TableLimits
    /// Every in-memory table of the service, behind one lock (``PlaylistTables``).
    private let tables: NIOLockedValueBox<PlaylistTables>
    /// Moves (under the tables' lock) whenever what ``hasOtherTokens(than:key:stored:)`` answers for some playlist
    /// may have changed: tokens remembered for a key, or another key's pushed out. Equal to a generation read before
    /// such a check, every answer since is the same (``ReplayCheck``).
    private let tokensGeneration = Atomic<UInt64>(0)

    /// ``tokensGeneration`` now.
    var tokensVersion: UInt64 { tokensGeneration.load(ordering: .acquiring) }

    /// Runs `body` on one of the tables, under the tables' lock. Each call builds its key path again
    /// (`swift_getKeyPath`, an allocation; inlining does not fold it): what is read on every request goes through a
    /// method of ``PlaylistTables`` instead (``livePlaylist(_:)``, ``hasOtherTokens(than:key:stored:)``).
    func withTable<Table, Result>(
        _ table: WritableKeyPath<PlaylistTables, Table>, _ body: (inout Table) throws -> Result
    ) rethrows -> Result {
        try tables.withLockedValue { try body(&$0[keyPath: table]) }
    }

    /// How many entries each table of ``PlaylistTables`` keeps; when one is full the entry used least recently goes
    /// (a table that emptied itself when full made an ended live playlist look like VOD, stored for good).
    struct TableLimits: Sendable {
        /// Live playlists in memory, and media playlists remembered as having been live.
        var livePlaylists = 4096
        /// The tokens each stored playlist was fetched for, and the imported variables of media playlists.
        var playlistTokens = 10_000
        /// Lifetimes of the media resources live playlists name.
        var liveResources = 50_000
        /// Playlist warnings already logged.
        var warnings = 10_000
        /// URLs with request headers from a channel list, and channel URLs.
        var channelHeaderURLs = 100_000
        /// Live playlists whose past segments are remembered for `/rewind/…`, and segments remembered for each (8192:
        /// 4.5 hours of 2-second segments; about 300 bytes each).
        var rewindPlaylists = 64
        var rewindSegments = 8192
    }

    /// Whether a playlist is served with absolute URLs (`http://authority/https/cdn…`) and its origin's
    /// `Content-Type`: IPTV channel lists, and anything served as a channel-list type or named `.m3u`. The players
    /// of such lists (VLC, mpv, Kodi) take a reference starting with `/` for a file and decide the format by the
    /// type and the name (docs/playlist-engine.md#absolute-urls).
    static func needsAbsoluteURLs(_ playlist: Playlist, contentType: String?, url: OriginURL) -> Bool {
        playlist.isChannelList || MediaTypes.isChannelListType(contentType) || url.pathExtension == "m3u"
    }

    /// Put before each URI of a playlist that needs absolute URLs, then taken out and its place recorded
    /// (``RewrittenPlaylist/baseInsertions``). Bytes no playlist has (one that had them is served with paths).
    private static let baseMarker: [UInt8] = Array("\u{1}hlscache-base\u{1}".utf8)

    init(
        configuration: ProxyConfiguration, store: CacheStore, keys: KeyService, cookies: CookieRefresher, logger: Logger,
        metrics: ProxyMetrics, writeFailures: CacheWriteFailureLog, limits: TableLimits = TableLimits()
    ) {
        self.limits = limits
        self.cookies = cookies
        tables = NIOLockedValueBox(PlaylistTables(limits: limits))
        self.writeFailures = writeFailures
        self.configuration = configuration
        self.metrics = metrics
        self.store = store
        self.keys = keys
        self.logger = logger
        self.readAhead = ReadAheadIndex(window: configuration.prefetchSegments)
        loadChannelHeaders()
    }

    /// Notes that the playlist stored under `key` was fetched for `url`.
    func rememberTokens(of url: OriginURL, for key: CacheKey) {
        let signature = CacheKey.volatileSignature(url, volatileParameters: configuration.volatileQueryParameters)
        withTable(\.fetchedFor) { table in
            // The same tokens again (every reload of a playlist): kept recent, no answer changes.
            guard table.value(forKey: key) != signature else { return }
            table.setValue(signature, forKey: key)
            tokensGeneration.wrappingAdd(1, ordering: .releasing)
        }
    }

    /// Whether the playlist stored under `key` was fetched for other tokens than `url` carries: as this process
    /// remembers it, else as the stored copy's digest says (a restart); unknown (a prewarmed copy) is no.
    func hasOtherTokens(than url: OriginURL, key: CacheKey, stored object: CachedObject) -> Bool {
        hasOtherTokens(
            than: CacheKey.volatileSignature(url, volatileParameters: configuration.volatileQueryParameters), key: key, stored: object)
    }

    /// ``hasOtherTokens(than:key:stored:)`` for a request whose tokens (``CacheKey/volatileSignature(_:volatileParameters:)``
    /// with this configuration's volatile parameters) are `signature`.
    func hasOtherTokens(than signature: String, key: CacheKey, stored object: CachedObject) -> Bool {
        // On every replayed playlist hit, so the table directly (see ``livePlaylist(_:)``).
        if let remembered = tables.withLockedValue({ $0.fetchedFor(key) }) { return remembered != signature }
        guard let digest = object.tokens else { return false }
        return digest != Self.digest(signature: signature)
    }

    /// The digest stored with a playlist fetched for `url` (``CachedObject/tokens``): never the tokens themselves.
    func tokenDigest(of url: OriginURL) -> String {
        Self.digest(signature: CacheKey.volatileSignature(url, volatileParameters: configuration.volatileQueryParameters))
    }

    private static func digest(signature: String) -> String {
        String(SHA256.hex("hlscache-playlist-tokens:" + signature).prefix(32))
    }

    private func imports(of key: CacheKey) -> [String: String] {
        withTable(\.importsByPlaylist) { $0.value(forKey: key) } ?? [:]
    }

    private func learnImports(from playlist: Playlist, url: OriginURL) {
        guard !playlist.definitions.isEmpty, let master = try? playlist.master(baseURL: url.string), !master.variables.isEmpty,
            let children = try? playlist.resolvedURIs(baseURL: url.string)
        else { return }
        let volatile = configuration.volatileQueryParameters
        let named = children.filter(\.role.isPlaylist).compactMap { try? OriginURL($0.url) }.map {
            CacheKey($0, volatileParameters: volatile)
        }
        withTable(\.importsByPlaylist) { table in
            for key in named { table.setValue(master.variables, forKey: key) }
        }
    }

    /// Where a request its origin refused gets fresh cookies: the multivariant playlists read are its pages.
    private let cookies: CookieRefresher

    /// Logs and counts the tolerances of a playlist the first time each is met for its URL.
    private func report(_ warnings: [PlaylistWarning], key: CacheKey, url: OriginURL) {
        guard !warnings.isEmpty else { return }
        let fresh = withTable(\.warned) { seen in
            warnings.filter { warning in
                let name = key.value + "#" + warning.kind.rawValue
                defer { seen.setValue(true, forKey: name) }
                return !seen.contains(name)
            }
        }
        for warning in fresh {
            metrics.playlistWarning(warning.kind)
            logger.warning(
                "playlist departs from RFC 8216, served as players read it",
                metadata: [
                    "url": "\(url.redacted)", "kind": "\(warning.kind.rawValue)", "line": "\(warning.line)", "detail": "\(warning.detail)",
                ])
        }
    }

    private static func channelHeaderContext(_ url: String) -> String { "hlscache-channel-headers:" + url }
    /// The row of the channel table that says a URL is a channel (``isChannel(_:)``) rather than carries headers: its
    /// key behind this prefix (a space never appears in a URL key).
    private static let channelRowPrefix = "channel "

    /// Reads back the channel headers a previous run learnt (the newest ``TableLimits/channelHeaderURLs``).
    private func loadChannelHeaders() {
        let masterKey = keys.masterKey
        do {
            var table = BoundedLRU<String, [(String, String)]>(maxCount: limits.channelHeaderURLs)
            var channels = BoundedLRU<String, Bool>(maxCount: limits.channelHeaderURLs)
            // Newest first: inserted oldest first, so the newest are the most recently used.
            for row in try store.channelHeaders(limit: limits.channelHeaderURLs).reversed() {
                if row.url.hasPrefix(Self.channelRowPrefix) {
                    channels.setValue(true, forKey: String(row.url.dropFirst(Self.channelRowPrefix.count)))
                    continue
                }
                guard let plain = masterKey.unseal(row.value, context: Self.channelHeaderContext(row.url)),
                    let pairs = try? JSONDecoder().decode([[String]].self, from: Data(plain))
                else { continue }
                table.setValue(pairs.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }, forKey: row.url)
            }
            withTable(\.channelHeaderTable) { $0 = table }
            withTable(\.channelURLs) { $0 = channels }
        } catch {
            logger.warning("cannot read the channel headers kept in the index: \(error)")
        }
    }

    /// Keeps newly learnt channel headers in the index, sealed (they may carry a token in a `Referer` or Kodi's
    /// `|Cookie=`); trimmed to the newest ``TableLimits/channelHeaderURLs`` every few thousand writes.
    private func persistChannelHeaders(_ learnt: [(String, [(String, String)])]) {
        guard !learnt.isEmpty else { return }
        let masterKey = keys.masterKey
        var rows: [(url: String, value: [UInt8])] = []
        for (url, headers) in learnt {
            guard let json = try? JSONEncoder().encode(headers.map { [$0.0, $0.1] }),
                let sealed = try? masterKey.seal(Array(json), context: Self.channelHeaderContext(url))
            else { continue }
            rows.append((url, sealed))
        }
        let trim = withTable(\.channelHeaderWrites) { written -> Bool in
            written += rows.count
            guard written >= 5_000 else { return false }
            written = 0
            return true
        }
        do {
            try store.saveChannelHeaders(rows, trimTo: trim ? limits.channelHeaderURLs : nil)
        } catch {
            writeFailures.record(error, label: "channel headers")
        }
    }

    private static func channelKey(_ url: OriginURL) -> String { "\(url.scheme)://\(url.authority.lowercased())\(url.path)" }

    /// Whether a channel list this process served names `url` as a channel.
    func isChannel(_ url: OriginURL) -> Bool {
        withTable(\.channelURLs) { $0.value(forKey: Self.channelKey(url)) != nil }
    }

    /// The headers a channel list asked for `url`, if any.
    func channelHeaders(for url: OriginURL) -> [(String, String)] {
        withTable(\.channelHeaderTable) { $0.value(forKey: Self.channelKey(url)) } ?? []
    }

    /// Learns the headers of each channel of a channel list, and hands the headers of a playlist reached from a
    /// channel on to every URL it names.
    private func learnChannelHeaders(from playlist: Playlist, url: OriginURL, imports: [String: String]) {
        var learnt: [(String, [(String, String)])] = []
        if playlist.isChannelList, let channels = try? playlist.channels(baseURL: url.string) {
            let urls = channels.compactMap { try? OriginURL($0.url) }.map(Self.channelKey)
            let newChannels = withTable(\.channelURLs) { known -> [String] in
                urls.filter { url in
                    defer { known.setValue(true, forKey: url) }
                    return !known.contains(url)
                }
            }
            persistChannelHeaders(newChannels.map { (Self.channelRowPrefix + $0, []) })
            for channel in channels where !channel.httpHeaders.isEmpty {
                guard let channelURL = try? OriginURL(channel.url) else { continue }
                learnt.append((Self.channelKey(channelURL), channel.httpHeaders.map { ($0.name, $0.value) }))
            }
        } else {
            let inherited = channelHeaders(for: url)
            guard !inherited.isEmpty, let children = try? playlist.resolvedURIs(baseURL: url.string, imports: imports) else { return }
            for child in children {
                guard let childURL = try? OriginURL(child.url) else { continue }
                learnt.append((Self.channelKey(childURL), inherited))
            }
        }
        record(learnt)
    }

    /// Learns request headers for `url` from Kodi's `URL|Name=value&…` suffix on a proxied request
    /// (``OriginURL/splittingHeaderSuffix(of:)``): sent with its origin requests and handed on to what it names, as a
    /// channel list's are.
    func learnHeaders(_ headers: [(name: String, value: String)], for url: OriginURL) {
        record([(Self.channelKey(url), headers.map { ($0.name, $0.value) })])
    }

    /// Keeps learnt headers in the table, and what is new in the index.
    private func record(_ learnt: [(String, [(String, String)])]) {
        guard !learnt.isEmpty else { return }
        // Only what is new is written to the index: a live playlist reloaded every few seconds names mostly known URLs.
        let fresh = withTable(\.channelHeaderTable) { table -> [(String, [(String, String)])] in
            var fresh: [(String, [(String, String)])] = []
            for (key, headers) in learnt {
                let known = table.peekValue(forKey: key)
                if known == nil || !known!.elementsEqual(headers, by: { $0.0 == $1.0 && $0.1 == $1.1 }) { fresh.append((key, headers)) }
                table.setValue(headers, forKey: key)
            }
            return fresh
        }
        persistChannelHeaders(fresh)
    }

    static func rewrittenKey(_ key: CacheKey) -> CacheKey { CacheKey(storedValue: key.value + "#hlscache-rewritten") }
    static func gzipKey(_ key: CacheKey) -> CacheKey { CacheKey(storedValue: key.value + "#hlscache-rewritten.gz") }

    /// A stored raw playlist turned out to be live (kept by an older version, or by hand): it must not be served.
    struct StoredLivePlaylist: Error {}

    /// Parses, rewrites and (when `store`) keeps a playlist fetched from `url`, the URL that answered: relative
    /// URIs resolve against it, and the raw copy remembers it when it is not `key`'s own (a redirect).
    /// `fromStore`: the raw bytes are a stored copy (only the rewritten and gzipped copies are written); a live one
    /// throws ``StoredLivePlaylist``.
    /// Keys (`EXT-X-KEY`, `EXT-X-SESSION-KEY`) of every method in the identity key format are registered with the
    /// key service and point at `/keys/{keyid}`; the engine never hands over licence servers (another KEYFORMAT) or
    /// non-HTTP key URIs, which stay as they are. Read tolerantly unless `playlists.strict` (docs/playlist-engine.md).
    /// Runs on the thread pool (registering a new key writes to the key database).
    /// - Throws: ``ProxyError/corrupted(_:)`` for what is no playlist at all or over the size cap (strict: for any
    ///   departure from the RFC); a ``KeyError`` when a key cannot be registered.
    func process(
        raw: [UInt8], key: CacheKey, url: OriginURL, store keep: Bool, fromStore: Bool = false, tokens: String? = nil,
        contentType: String? = nil
    ) throws -> RewrittenPlaylist {
        // A large playlist's working copies (the line and URI index, the rewritten bytes, gzip) are freed when the
        // work returns, but glibc keeps such freed memory in its arenas: an 8 MiB playlist left the process 17 MB
        // larger for good. Given back once its work is done; small playlists (nearly all) are not worth the call.
        defer { if raw.count >= Self.trimThreshold { MemoryTrim.giveBackFreedMemory() } }
        return try rewriteAndStore(
            raw: raw, key: key, url: url, store: keep, fromStore: fromStore, tokens: tokens, contentType: contentType)
    }

    /// Playlists this large are followed by ``MemoryTrim/giveBackFreedMemory()``.
    static let trimThreshold = 1 << 20

    private func rewriteAndStore(
        raw: [UInt8], key: CacheKey, url: OriginURL, store keep: Bool, fromStore: Bool, tokens: String?, contentType: String?
    ) throws -> RewrittenPlaylist {
        // The parsed playlist (its line and URI index: about three times the size of the text) is gone once `rewrite`
        // returns, before the rewritten bytes are copied into buffers and stored.
        let (rewritten, isLive, ttl, insertions, rewound) = try rewrite(
            raw: raw, key: key, url: url, fromStore: fromStore, contentType: contentType)
        if raw.count >= Self.trimThreshold { MemoryTrim.giveBackFreedMemory() }
        if let insertions {
            // Its body depends on the request's Host: made for each answer, never stored rewritten (the raw copy is,
            // with the origin's type, for the next request).
            var result = RewrittenPlaylist(body: ByteBuffer(bytes: rewritten), gzip: nil, isLive: isLive, ttl: ttl)
            result.contentType = (contentType?.isEmpty ?? true) ? "audio/x-mpegurl" : contentType!
            result.baseInsertions = insertions
            if keep {
                if isLive {
                    remember(result, key: key)
                } else if !fromStore {
                    do {
                        let redirected = CacheKey(url, volatileParameters: configuration.volatileQueryParameters) != key
                        try write(raw, key: key, location: redirected ? url.string : nil, tokens: tokens, contentType: result.contentType)
                    } catch {
                        writeFailures.record(error, label: "playlist \(url.redacted)")
                    }
                }
            }
            return result
        }
        let gzipped = rewritten.count >= 256 ? Gzip.compress(rewritten) : nil
        var result = RewrittenPlaylist(
            body: ByteBuffer(bytes: rewritten), gzip: gzipped.map { ByteBuffer(bytes: $0) }, isLive: isLive, ttl: ttl,
            madeAt: configuration.livePlaylistClock())
        result.rewound = rewound.map { ByteBuffer(bytes: $0) }
        guard keep else { return result }
        if isLive {
            remember(result, key: key)
        } else {
            do {
                // A stored raw copy stays as it is: replacing it with the same bytes would drop its expiry and
                // make it a miss for the instant of the commit (a second player, the playback recorder).
                if !fromStore {
                    let redirected = CacheKey(url, volatileParameters: configuration.volatileQueryParameters) != key
                    try write(raw, key: key, location: redirected ? url.string : nil, tokens: tokens)
                }
                try write(rewritten, key: PlaylistService.rewrittenKey(key))
                if let gzipped { try write(gzipped, key: PlaylistService.gzipKey(key)) }
            } catch {
                writeFailures.record(error, label: "playlist \(url.redacted)")
            }
        }
        return result
    }

    /// Parses and rewrites `raw`, and learns what the playlist says (keys, imports, read-ahead, live lifetimes).
    /// `insertions`: where the server's base URL goes, for a playlist that needs absolute URLs (else nil).
    private func rewrite(
        raw: [UInt8], key: CacheKey, url: OriginURL, fromStore: Bool, contentType: String?
    ) throws -> (bytes: [UInt8], isLive: Bool, ttl: Double, insertions: [Int]?, rewound: [UInt8]?) {
        var insertions: [Int]?
        var named: [KeyID] = []
        let playlist: Playlist
        let rewritten: [UInt8]
        var rewound: [UInt8]?
        let keys = self.keys
        var rewriter = ProxyPathRewriter()
        // Keys go to the key store's /keys/{id}; the engine never passes licence servers or skd:// here.
        rewriter.keyRewrite = { resolved, _, method in
            guard let keyURL = try? OriginURL(resolved) else { return nil }
            // The METHOD says the key's length: a wrong-sized answer of its origin is refused, not stored.
            let id = try keys.register(keyURL, method: method)
            named.append(id)
            return id.path(for: keyURL)
        }
        do {
            playlist = try Playlist(
                bytes: raw, options: ParseOptions(maxBytes: configuration.maxPlaylistBytes, tolerant: !configuration.strictPlaylists))
            let imports = playlist.kind == .media ? imports(of: key) : [:]
            if Self.needsAbsoluteURLs(playlist, contentType: contentType, url: url), !Self.contains(raw, Self.baseMarker) {
                let marked = try playlist.rewrite(
                    baseURL: url.string, imports: imports, keepingUnresolved: true,
                    using: MarkingRewriter(inner: rewriter, marker: String(decoding: Self.baseMarker, as: UTF8.self)))
                (rewritten, insertions) = Self.removingMarkers(marked)
            } else {
                rewritten = try playlist.rewrite(baseURL: url.string, imports: imports, keepingUnresolved: true, using: rewriter)
            }
            if playlist.kind == .master, configuration.liveRewindWindow > 0, insertions == nil {
                rewound = try playlist.rewrite(baseURL: url.string, keepingUnresolved: true, using: RewindLinks(inner: rewriter))
            }
            if playlist.kind == .master {
                learnImports(from: playlist, url: url)
                cookies.learn(page: url)
            }
        } catch let error as PlaylistError {
            throw ProxyError.corrupted("playlist from \(url.host) is invalid: \(error)")
        }
        report(playlist.warnings, key: key, url: url)
        learnChannelHeaders(from: playlist, url: url, imports: imports(of: key))
        // A channel list's URLs are channels, not segments played in turn: no read-ahead (it would open the next
        // channels' endless streams), and no live lifetimes.
        if !playlist.isChannelList {
            readAhead.learn(playlist, key: key, url: url, volatileParameters: configuration.volatileQueryParameters)
        }
        var isLive = false
        var ttl = 0.0
        if playlist.kind == .media {
            var targetDuration = 0.0
            for (index, line) in playlist.lines.enumerated() {
                if case .tag(.targetDuration) = line.kind {
                    let text = playlist.text(ofLine: index)
                    targetDuration =
                        Double(text.split(separator: ":").last.map { String($0).trimmingCharacters(in: .whitespaces) } ?? "") ?? 0
                }
            }
            isLive = playlist.isLiveMedia
            if isLive {
                if configuration.liveRewindWindow > 0, !playlist.isChannelList, insertions == nil {
                    rewound = rewind(playlist, key: key, url: url, imports: imports(of: key), using: rewriter)
                }
                let lifetime = playlist.isChannelList ? nil : learnLifetimes(of: playlist, url: url, imports: imports(of: key))
                if let lifetime {
                    for id in named {
                        do { try keys.limitToLive(id, seconds: lifetime) } catch { logger.warning("key \(id): \(error.message)") }
                    }
                }
                withTable(\.seenLive) { _ = $0.setValue(true, forKey: key) }
            } else if !fromStore, withTable(\.seenLive, { $0.value(forKey: key) != nil }) {
                // A live stream that ended (the encoder wrote EXT-X-ENDLIST): the same URL may go live again with
                // the next run, so it is kept like a live playlist, briefly and in memory, not on disk for good.
                isLive = true
            }
            ttl = max(0.1, min(targetDuration > 0 ? targetDuration : 2, 3600) * configuration.liveTTLFactor)
        }
        if fromStore && playlist.isLiveMedia { throw StoredLivePlaylist() }
        return (rewritten, isLive, ttl, insertions, rewound)
    }

    private static func contains(_ bytes: [UInt8], _ needle: [UInt8]) -> Bool {
        guard bytes.count >= needle.count, let first = needle.first else { return false }
        var i = 0
        while let found = bytes[i...].firstIndex(of: first) {
            if found + needle.count > bytes.count { return false }
            if bytes[found..<(found + needle.count)].elementsEqual(needle) { return true }
            i = found + 1
        }
        return false
    }

    /// `marked` without the markers, and where each was (offsets in the result).
    private static func removingMarkers(_ marked: [UInt8]) -> ([UInt8], [Int]) {
        var out: [UInt8] = []
        out.reserveCapacity(marked.count)
        var offsets: [Int] = []
        var i = 0
        let first = baseMarker[0]
        while i < marked.count {
            if marked[i] == first, i + baseMarker.count <= marked.count, marked[i..<(i + baseMarker.count)].elementsEqual(baseMarker) {
                offsets.append(out.count)
                i += baseMarker.count
                continue
            }
            out.append(marked[i])
            i += 1
        }
        return (out, offsets)
    }

    private func write(
        _ bytes: [UInt8], key: CacheKey, location: String? = nil, tokens: String? = nil, contentType: String = MediaTypes.playlist
    ) throws {
        let writer = try store.makeWriter(for: key, expectedLength: Int64(bytes.count))
        do {
            try writer.write(bytes)
            _ = try writer.finish(contentType: contentType, kind: .playlist, location: location, tokens: tokens)
        } catch {
            writer.abort()
            throw error
        }
    }

    // MARK: - Live playlists

    private func remember(_ playlist: RewrittenPlaylist, key: CacheKey) {
        let expires = configuration.livePlaylistClock() + .nanoseconds(Int64(playlist.ttl * 1e9))
        withTable(\.live) { _ = $0.setValue((playlist, expires), forKey: key) }
    }

    /// A live playlist still fresh in memory.
    func livePlaylist(_ key: CacheKey) -> RewrittenPlaylist? {
        // On every replayed playlist hit: the table reached directly, not through ``withTable(_:_:)``, whose key path
        // is built again at each call (`swift_getKeyPath`, an allocation), and through a method of the tables: a
        // closure reaching `tables.live` itself was compiled to a key path access as well.
        let clock = configuration.livePlaylistClock
        return tables.withLockedValue { $0.livePlaylist(key, now: clock) }
    }

    // MARK: - Responding

    func respond(with playlist: RewrittenPlaylist, to responder: Responder, cache: String) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: playlist.contentType)
        headers.add(name: "Vary", value: playlist.baseInsertions.isEmpty ? "Accept-Encoding" : "Accept-Encoding, Host")
        headers.add(name: "X-Cache", value: cache)
        headers.add(name: "Cache-Control", value: playlist.cacheControl(at: configuration.livePlaylistClock()))
        var body = playlist.body
        if responder.wantsRewind, let rewound = playlist.rewound {
            body = rewound
            // Only a live media playlist or a multivariant one is given a rewound form.
            headers.add(name: "X-Rewind", value: playlist.isLive ? "extended" : "renditions")
        } else if !playlist.baseInsertions.isEmpty {
            body = playlist.body(base: responder.request.serverBase(configuration.serverNames))
            if responder.request.acceptsGzip, body.readableBytes >= 256 {
                body = ByteBuffer(bytes: Gzip.compress(Array(body.readableBytesView)))
                headers.add(name: "Content-Encoding", value: "gzip")
            }
        } else if responder.request.acceptsGzip, let gzip = playlist.gzip {
            body = gzip
            headers.add(name: "Content-Encoding", value: "gzip")
        }
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        responder.send(status: .ok, headers: headers, body: .bytes(body))
    }

    /// The answer ``respond(with:to:cache:)`` would send `playlist` with (`X-Cache: HIT`), as a head rendered
    /// once for this version, `Cache-Control` value, encoding and CORS form — for a plain GET or HEAD on a kept-alive
    /// HTTP/1.1 connection whose CORS headers do not name its page, of a playlist whose body is the same for every
    /// request (no absolute URLs, no `/rewind/…`). Nil otherwise: respond as usual. Players at a live edge reload the
    /// same version thousands of times; building and encoding its headers each time was a third of what such a
    /// reload cost the server in user space.
    func preparedAnswer(for playlist: RewrittenPlaylist, to responder: Responder) -> PreparedLiveHeads.Answer? {
        guard playlist.baseInsertions.isEmpty, !responder.wantsRewind, responder.request.isPlainFetch, responder.sendsPlainKeepAlive,
            !responder.echoesOrigin
        else { return nil }
        let gzip = responder.request.acceptsGzip ? playlist.gzip : nil
        // Compared as a number on every request; the header's text is made only when a form is rendered.
        let form = PreparedLiveHeads.Form(
            maxAge: playlist.maxAge(at: configuration.livePlaylistClock()), gzip: gzip != nil,
            anyPage: responder.webOrigins.allowsAnyPage, proxiedContent: responder.isProxiedContent)
        if let answer = playlist.preparedHeads.answer(for: form) { return answer }
        let body = gzip ?? playlist.body
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: playlist.contentType)
        headers.add(name: "Vary", value: "Accept-Encoding")
        headers.add(name: "X-Cache", value: "HIT")
        headers.add(name: "Cache-Control", value: form.maxAge.map { "max-age=\($0)" } ?? "no-cache")
        if gzip != nil { headers.add(name: "Content-Encoding", value: "gzip") }
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers = responder.decorated(headers)
        var head = ByteBuffer()
        head.reserveCapacity(512)
        _ = ResponseEncoding.writeHead(
            status: .ok, headers: headers, bodyLength: Int64(body.readableBytes), chunkedAllowed: true, headOnly: false,
            connection: nil, terminated: false, into: &head)
        let answer = PreparedLiveHeads.Answer(head: head, headers: headers, body: body)
        playlist.preparedHeads.remember(answer, for: form)
        return answer
    }

    /// Headers for a stored rewritten playlist served as a file.
    func fileHeaders(gzip: Bool) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: MediaTypes.playlist)
        headers.add(name: "Vary", value: "Accept-Encoding")
        headers.add(name: "Cache-Control", value: "no-cache")
        if gzip { headers.add(name: "Content-Encoding", value: "gzip") }
        return headers
    }
}

/// Puts a marker before every replacement of another rewriter (``PlaylistService``'s absolute URLs).
private struct MarkingRewriter: URIRewriter {
    let inner: ProxyPathRewriter
    let marker: String

    func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? {
        try inner.rewrite(resolvedURL, role: role).map { marker + $0 }
    }

    func rewriteKey(_ resolvedURL: String, role: URIRole, method: String) throws -> String? {
        try inner.rewriteKey(resolvedURL, role: role, method: method).map { marker + $0 }
    }

    func directoryPrefix(for directoryURL: String, role: URIRole) -> String? {
        inner.directoryPrefix(for: directoryURL, role: role).map { marker + $0 }
    }
}
