import HLSCacheCore
import HLSPlaylist
import NIOConcurrencyHelpers

/// Predictive read-ahead: when a player gets segment k of a media playlist, segments k+1 … k+W of that
/// playlist are fetched into the cache in the background, so leaving the precached part does not stall.
///
/// The index is learned from the playlists the proxy serves: each media playlist's segment order, and each
/// multivariant playlist's variants (so a switch to another variant cancels the read-ahead of the one the
/// player left). Audio and subtitle renditions are read ahead independently of the video variant. Bounded:
/// the least recently used playlists are forgotten past `maxPlaylists`, or past `maxSegments` segments in all, and a
/// media playlist of more than `maxSegmentsPerPlaylist` segments is not learned (no read-ahead for it): each segment
/// costs a few hundred bytes here, and an 8 MiB playlist of 220,000 segments would keep ~50 MB for good.
final class ReadAheadIndex: Sendable {
    struct Segment: Sendable {
        var url: OriginURL
        var key: CacheKey
    }

    /// What the resource layer should do after serving a segment.
    struct Plan: Sendable {
        /// Segments to fetch ahead, in order.
        var prefetch: [Segment] = []
        /// Read-aheads of a playlist the player switched away from: cancel those still unwatched.
        var cancel: [CacheKey] = []
    }

    private struct Position {
        var playlist: String
        var index: Int
        /// The store's generation (``HLSCacheStore/CacheStore/generation``) when every segment of the window after
        /// this one was found stored: until the store changes, a request for this segment reads nothing ahead
        /// without asking the store again (``windowStored(after:generation:)``).
        var windowStoredAt: UInt64?
    }

    private struct State {
        /// Media playlists' segments by playlist key, least recently learned or asked for out (``forgetOldest(_:)``).
        var playlists = BoundedLRU<String, [Segment]>(maxCount: .max)
        /// Segment key → where it is. A segment in several playlists keeps the latest.
        var positions: [String: Position] = [:]
        /// Variant playlist key → multivariant playlist key.
        var variantGroup: BoundedLRU<String, String>
        /// Multivariant key → (variant being read ahead, keys it asked for).
        var active: BoundedLRU<String, (variant: String, pending: [CacheKey])>
    }

    let window: Int
    let maxPlaylists: Int
    let maxSegmentsPerPlaylist: Int
    let maxSegments: Int
    private let state: NIOLockedValueBox<State>

    /// - Parameters:
    ///   - maxSegmentsPerPlaylist: 20,000 segments are 22 hours of 4-second segments.
    init(window: Int, maxPlaylists: Int = 512, maxSegmentsPerPlaylist: Int = 20_000, maxSegments: Int = 200_000) {
        self.window = window
        self.maxPlaylists = maxPlaylists
        self.maxSegmentsPerPlaylist = maxSegmentsPerPlaylist
        self.maxSegments = maxSegments
        // A multivariant playlist names a few to a few dozen variants; a forgotten one only means its read-ahead is
        // not cancelled when the player leaves it.
        self.state = NIOLockedValueBox(
            State(
                variantGroup: BoundedLRU(maxCount: maxPlaylists * ReadAheadIndex.variantsPerPlaylist),
                active: BoundedLRU(maxCount: maxPlaylists)))
    }

    /// How many variants per learned playlist the variant table keeps (least recently used out).
    static let variantsPerPlaylist = 8

    /// Segments learned, over every playlist.
    var segmentCount: Int { state.withLockedValue { $0.positions.count } }

    /// Records what a served playlist says: segment order for media playlists, variants for multivariant ones.
    func learn(_ playlist: Playlist, key: CacheKey, url: OriginURL, volatileParameters: [String]) {
        guard window > 0 else { return }
        // Counted before anything is resolved: resolving alone made a string per segment.
        if playlist.kind == .media, playlist.uriSlots.lazy.filter({ $0.role == .segment }).count > maxSegmentsPerPlaylist { return }
        guard let uris = try? playlist.resolvedURIs(baseURL: url.string) else { return }
        switch playlist.kind {
        case .master:
            let variants = uris.filter { $0.role == .variant }.compactMap { try? OriginURL($0.url) }
                .map { CacheKey($0, volatileParameters: volatileParameters).value }
            state.withLockedValue { state in
                for variant in variants { state.variantGroup.setValue(key.value, forKey: variant) }
            }
        case .media:
            var segments: [Segment] = []
            segments.reserveCapacity(uris.count)
            var previous: String?
            for (resolved, role) in uris where role == .segment {
                // Byte ranges of one file: one resource, nothing to read ahead within it.
                guard resolved != previous, let origin = try? OriginURL(resolved) else { continue }
                previous = resolved
                segments.append(Segment(url: origin, key: CacheKey(origin, volatileParameters: volatileParameters)))
            }
            state.withLockedValue { state in
                if let old = state.playlists.removeValue(forKey: key.value) { Self.unindex(old, of: key.value, in: &state) }
                state.playlists.setValue(segments, forKey: key.value)
                for (index, segment) in segments.enumerated() {
                    state.positions[segment.key.value] = Position(playlist: key.value, index: index)
                }
                forgetOldest(&state)
            }
        }
    }

    /// A player asked for the resource `key`: what to fetch ahead, and what to stop.
    /// - Parameter generation: the store's now; the window found stored at this generation is not planned again.
    func requested(_ key: CacheKey, generation: UInt64? = nil) -> Plan {
        guard window > 0 else { return Plan() }
        return state.withLockedValue { state in
            guard let position = state.positions[key.value], let segments = state.playlists.value(forKey: position.playlist) else {
                return Plan()
            }
            let (playlistKey, index) = (position.playlist, position.index)
            let upper = min(segments.count, index + 1 + window)
            let stored = generation != nil && position.windowStoredAt == generation
            var plan = Plan(prefetch: index + 1 < upper && !stored ? Array(segments[(index + 1)..<upper]) : [])
            if let group = state.variantGroup.value(forKey: playlistKey) {
                if let current = state.active.peekValue(forKey: group), current.variant != playlistKey { plan.cancel = current.pending }
                state.active.setValue((playlistKey, plan.prefetch.map(\.key)), forKey: group)
            }
            return plan
        }
    }

    /// Every segment of the window after `key` was found stored when the store was at `generation` (read before the
    /// store was asked): ``requested(_:generation:)`` plans nothing after `key` until the store changes.
    func windowStored(after key: CacheKey, generation: UInt64) {
        state.withLockedValue { $0.positions[key.value]?.windowStoredAt = generation }
    }

    /// Forgets the least recently used playlists while over either bound.
    private func forgetOldest(_ state: inout State) {
        while state.playlists.count > maxPlaylists || state.positions.count > maxSegments,
            let (playlistKey, segments) = state.playlists.removeLeastRecent()
        {
            Self.unindex(segments, of: playlistKey, in: &state)
        }
    }

    /// Removes the positions of `segments` that still point into `playlistKey`.
    private static func unindex(_ segments: [Segment], of playlistKey: String, in state: inout State) {
        for segment in segments where state.positions[segment.key.value]?.playlist == playlistKey {
            state.positions[segment.key.value] = nil
        }
    }
}
