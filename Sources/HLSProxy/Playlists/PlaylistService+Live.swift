import Foundation
import HLSCacheCore
import HLSPlaylist

/// Live media playlists: how long what they list stays served.
extension PlaylistService {
    /// Learns the lifetime of the live playlist's media and returns it (`nil` for an EVENT playlist).
    @discardableResult
    func learnLifetimes(of playlist: Playlist, url: OriginURL, imports: [String: String]) -> Double? {
        guard let media = try? playlist.media(baseURL: url.string, imports: imports), media.playlistType != .event else { return nil }
        // With `live.rewindWindow`, what was stored is kept that much longer for `/rewind/…`.
        let lifetime = media.liveWindowLifetime + configuration.liveRewindWindow
        let volatile = configuration.volatileQueryParameters
        let keys = Set(media.listedMediaURLs.compactMap { try? OriginURL($0) }.map { CacheKey($0, volatileParameters: volatile) })
        withTable(\.liveLifetimes) { table in
            for key in keys { table.setValue(lifetime, forKey: key) }
        }
        // What is stored of the window stays served for the lifetime from this reading: counted only from when it
        // was stored, a segment stored early (a short first window, the window's oldest) expired while still listed,
        // and a recording reading that window asked the origin for it again (LiveRecordingTests). A recording's own
        // readings do the same (Downloader.keepWindow(of:)).
        do {
            try store.extendExpiry(
                Array(keys), to: Date().addingTimeInterval(lifetime), minimumStep: Double(media.targetDuration ?? 10))
        } catch {
            logger.warning("live lifetimes of \(url.redacted) not extended: \(error)")
        }
        return lifetime
    }

    /// When a media resource about to be stored stops being served: `nil` unless a live playlist names it.
    func liveExpiry(of key: CacheKey) -> Date? {
        withTable(\.liveLifetimes) { $0.value(forKey: key) }.map { Date().addingTimeInterval($0) }
    }

    /// The live media playlist `playlist` (read from `url`) extended backwards for `/rewind/…`, rewritten with
    /// `rewriter` as its plain form is: this reading is remembered (``PlaylistTables/rewinds``), and the segments
    /// remembered from before its window that the cache still holds, consecutive up to the window, are listed
    /// before it. Nil when none is held (the plain body is served) or it cannot be made (logged).
    func rewind(
        _ playlist: Playlist, key: CacheKey, url: OriginURL, imports: [String: String], using rewriter: ProxyPathRewriter
    ) -> [UInt8]? {
        guard let media = try? playlist.media(baseURL: url.string, imports: imports), media.playlistType != .event else { return nil }
        let now = Date().timeIntervalSince1970
        let keep = configuration.liveRewindWindow
        let segments = limits.rewindSegments
        // Taken out while it is updated, so its arrays are not copied.
        let history = withTable(\.rewinds) { table -> LiveRewind in
            var history = table.removeValue(forKey: key) ?? LiveRewind(keep: keep, maxEntries: segments)
            history.observe(playlist, media: media, now: now)
            _ = table.setValue(history, forKey: key)
            return history
        }
        let volatile = configuration.volatileQueryParameters
        let store = self.store
        guard
            let extended = history.extending(
                playlist, media: media,
                isHeld: { entry in
                    guard let segmentURL = try? OriginURL(entry.url) else { return false }
                    return store.holds(CacheKey(segmentURL, volatileParameters: volatile))
                })
        else { return nil }
        do {
            let parsed = try Playlist(
                bytes: extended, options: ParseOptions(maxBytes: max(configuration.maxPlaylistBytes, extended.count), tolerant: true))
            return try parsed.rewrite(baseURL: url.string, imports: imports, keepingUnresolved: true, using: rewriter)
        } catch {
            logger.warning("rewind of \(url.redacted) not made: \(error)")
            return nil
        }
    }
}

/// A multivariant playlist for `/rewind/…`: its variant, rendition and I-frame playlists at their `/rewind/…` URL,
/// so a player given the multivariant playlist's rewind URL rewinds every rendition; everything else (session keys,
/// session data, steering, images) as ``inner`` writes it.
struct RewindLinks: URIRewriter {
    let inner: ProxyPathRewriter

    private static func rewound(_ path: String?, role: URIRole) -> String? {
        guard let path, role == .variant || role == .rendition || role == .iFramePlaylist, path.hasPrefix("/http") else { return path }
        return "/rewind" + path
    }

    func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? {
        Self.rewound(try inner.rewrite(resolvedURL, role: role), role: role)
    }

    func rewriteKey(_ resolvedURL: String, role: URIRole, method: String) throws -> String? {
        try inner.rewriteKey(resolvedURL, role: role, method: method)
    }

    func directoryPrefix(for directoryURL: String, role: URIRole) -> String? {
        Self.rewound(inner.directoryPrefix(for: directoryURL, role: role), role: role)
    }
}
