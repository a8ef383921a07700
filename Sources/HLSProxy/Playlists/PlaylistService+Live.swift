import Foundation
import HLSCacheCore
import HLSPlaylist

/// Live media playlists: how long what they list stays served.
extension PlaylistService {
    /// Learns the lifetime of the live playlist's media and returns it (`nil` for an EVENT playlist).
    @discardableResult
    func learnLifetimes(of playlist: Playlist, url: OriginURL, imports: [String: String]) -> Double? {
        guard let media = try? playlist.media(baseURL: url.string, imports: imports), media.playlistType != .event else { return nil }
        let window = media.segments.reduce(0) { $0 + $1.duration }
        // With `live.rewindWindow`, what was stored is kept that much longer for `/rewind/…`.
        let lifetime = window + 2 * Double(media.targetDuration ?? 10) + configuration.liveRewindWindow
        var urls = media.segments.map(\.url) + media.parts.map(\.url)
        urls += media.segments.compactMap { $0.map?.url }
        let volatile = configuration.volatileQueryParameters
        let keys = Set(urls.compactMap { try? OriginURL($0) }.map { CacheKey($0, volatileParameters: volatile) })
        withTable(\.liveLifetimes) { table in
            for key in keys { table.setValue(lifetime, forKey: key) }
        }
        // What is stored of the window stays served for the lifetime from this reading: counted only from when it
        // was stored, a segment stored early (a short first window, the window's oldest) expired while still listed,
        // and a recording reading that window asked the origin for it again (LiveRecordingTests).
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
