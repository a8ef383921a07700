import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSPlaylist
import HLSProxy
import NIOConcurrencyHelpers
import NIOHTTP1

/// Records playback of items through the proxy (the offline SDKs' "record consumption") and counts cache hits.
///
/// ``observe(_:status:headers:)`` runs on the event loop for every proxied response and only appends the target to
/// a bounded list. ``flush(_:now:)`` (the admin loop, off the event loops) maps each served segment to the items that
/// list it and their position on the media timeline (from the item's stored media playlists), records
/// `lastPlayedAt` and the served seconds in `items.sqlite`, and refreshes the last access of all the item's cache
/// objects, so LRU eviction sees a played item as recently used as a whole, not segment by segment.
final class ConsumptionRecorder: Sendable {
    private struct Pending {
        var targets: [String] = []
        var hits = 0
        var misses = 0
        var dropped = 0
    }

    /// Where one cached file sits on an item's timeline.
    struct Placement: Sendable, Hashable {
        var item: String
        var start: Double
        var end: Double
    }

    private struct Timelines {
        /// Segment cache key → placements, for the items whose timelines are loaded.
        var byKey: [String: [Placement]] = [:]
        /// Items whose playlists were read (and the renditions they had then).
        var loaded: [String: [String]] = [:]
        /// When each item's objects were last refreshed for LRU.
        var touchedAt: [String: Date] = [:]
        /// Live items whose media playlists were not stored when last looked at.
        var unloadable: [String: DownloadItem] = [:]
        var unloadableCheckedAt = Date.distantPast
    }

    private let pending = NIOLockedValueBox(Pending())
    private let timelines = NIOLockedValueBox(Timelines())
    private let store: CacheStore
    private let items: ItemStore
    private let volatileParameters: [String]
    private let maxPending = 16_384
    private let counters = NIOLockedValueBox((hits: 0, misses: 0))

    init(store: CacheStore, items: ItemStore, volatileParameters: [String]) {
        self.store = store
        self.items = items
        self.volatileParameters = volatileParameters
    }

    /// Cache hits and misses of proxied resources since the server started.
    var hitsAndMisses: (hits: Int, misses: Int) {
        let queued = pending.withLockedValue { ($0.hits, $0.misses) }
        let counted = counters.withLockedValue { $0 }
        return (counted.hits + queued.0, counted.misses + queued.1)
    }

    /// On the event loop: remember a successful response to a proxied resource.
    func observe(_ request: ProxyRequest, status: HTTPResponseStatus, headers: HTTPHeaders) {
        let uri = request.head.uri
        guard uri.hasPrefix("/http"), request.method == .GET || request.method == .HEAD else { return }
        let cache = headers.first(name: "x-cache")
        guard status == .ok || status == .partialContent || cache != nil else { return }
        pending.withLockedValue { p in
            if cache == "HIT" { p.hits += 1 } else if cache == "MISS" { p.misses += 1 }
            guard request.method == .GET, status == .ok || status == .partialContent else { return }
            if p.targets.count < maxPending { p.targets.append(uri) } else { p.dropped += 1 }
        }
    }

    /// Off the event loops: records what was served since the last flush.
    /// - Returns: the items played, with their updated records (for `played` events).
    func flush(_ changes: ItemChangeFeed.Changes, now: Date = Date()) -> [(String, ItemConsumption)] {
        let taken = pending.withLockedValue { p -> Pending in
            defer { p = Pending() }
            return p
        }
        counters.withLockedValue { $0.hits += taken.hits; $0.misses += taken.misses }
        refreshTimelines(changes, now: now)
        guard !taken.targets.isEmpty else { return [] }
        var ranges: [String: [(Double, Double)]] = [:]
        let byKey = timelines.withLockedValue { $0.byKey }
        for target in Set(taken.targets) {
            guard let url = try? OriginURL(proxyTarget: target) else { continue }
            let key = CacheKey(url, volatileParameters: volatileParameters).value
            for placement in byKey[key] ?? [] { ranges[placement.item, default: []].append((placement.start, placement.end)) }
        }
        var played: [(String, ItemConsumption)] = []
        for (id, list) in ranges {
            for (start, end) in list { try? items.recordPlayback(id, start: start, end: end, at: now) }
            touchObjects(of: id, now: now)
            if let record = try? items.consumption(id) { played.append((id, record)) }
        }
        return played
    }

    /// Loads the timelines of changed items not loaded yet (or whose renditions changed); forgets removed, expired
    /// and deleted items. Items with no stored media playlist yet are tried again at most every
    /// ``unloadableRetryInterval`` (a failed item may never get one, and there can be thousands).
    private func refreshTimelines(_ changes: ItemChangeFeed.Changes, now: Date) {
        let (loaded, retryDue) = timelines.withLockedValue { t -> ([String: [String]], [DownloadItem]) in
            if changes.isFirst { t.unloadable = [:] }
            var due: [DownloadItem] = []
            if now.timeIntervalSince(t.unloadableCheckedAt) >= Self.unloadableRetryInterval {
                t.unloadableCheckedAt = now
                due = Array(t.unloadable.values)
            }
            return (t.loaded, due)
        }
        var candidates: [String: DownloadItem] = [:]
        for item in retryDue { candidates[item.id] = item }
        for item in changes.changed { candidates[item.id] = item }
        var drop = Set(changes.removed)
        var fresh: [String: ([String], [String: Placement])] = [:]
        var unloadable: [String: DownloadItem?] = [:]
        for id in changes.removed { unloadable[id] = .some(nil) }
        for item in candidates.values {
            guard item.state != .deleted && item.state != .expired else {
                drop.insert(item.id)
                unloadable[item.id] = .some(nil)
                continue
            }
            guard loaded[item.id] != item.renditions || loaded[item.id] == nil else { continue }
            if let placements = timeline(of: item) {
                fresh[item.id] = (item.renditions, placements)
                unloadable[item.id] = .some(nil)
                if loaded[item.id] != nil { drop.insert(item.id) }
            } else {
                unloadable[item.id] = item
            }
        }
        let stale = drop.filter { loaded[$0] != nil }
        timelines.withLockedValue { t in
            for (id, item) in unloadable { t.unloadable[id] = item }
            guard !fresh.isEmpty || !stale.isEmpty else { return }
            if !stale.isEmpty {
                for (key, list) in t.byKey {
                    let kept = list.filter { !stale.contains($0.item) }
                    t.byKey[key] = kept.isEmpty ? nil : kept
                }
                for id in stale { t.loaded[id] = nil }
            }
            for (id, (renditions, placements)) in fresh {
                t.loaded[id] = renditions
                for (key, placement) in placements { t.byKey[key, default: []].append(placement) }
            }
        }
    }

    /// How often items without a stored media playlist are looked at again.
    static let unloadableRetryInterval: TimeInterval = 30

    /// Segment key → placement for every stored media playlist of the item; `nil` until one is stored.
    private func timeline(of item: DownloadItem) -> [String: Placement]? {
        let playlists = item.renditions.isEmpty ? [item.url] : item.renditions
        var placements: [String: Placement] = [:]
        var foundAny = false
        for playlistURL in playlists {
            guard let url = try? OriginURL(playlistURL), let object = store.lookup(CacheKey(url, volatileParameters: volatileParameters)),
                object.kind == .playlist, let data = FileManager.default.contents(atPath: object.path),
                let playlist = try? Playlist(bytes: [UInt8](data)), playlist.kind == .media,
                let media = try? playlist.media(baseURL: url.string)
            else { continue }
            foundAny = true
            for segment in media.segments {
                guard let segmentURL = try? OriginURL(segment.url) else { continue }
                let key = CacheKey(segmentURL, volatileParameters: volatileParameters).value
                let end = segment.startTime + segment.duration
                if var existing = placements[key] {
                    // Byte ranges of one file: the file covers all of them.
                    existing.start = min(existing.start, segment.startTime)
                    existing.end = max(existing.end, end)
                    placements[key] = existing
                } else {
                    placements[key] = Placement(item: item.id, start: segment.startTime, end: end)
                }
            }
        }
        return foundAny ? placements : nil
    }

    /// Marks every object of the item as just used (at most once a minute per item).
    private func touchObjects(of id: String, now: Date) {
        let due = timelines.withLockedValue { t -> Bool in
            if let last = t.touchedAt[id], now.timeIntervalSince(last) < 60 { return false }
            t.touchedAt[id] = now
            return true
        }
        guard due, let resources = try? items.resources(id) else { return }
        for resource in resources where resource.done {
            // A lookup records the access time (flushed to the index in the background).
            _ = store.lookup(CacheKey(storedValue: resource.key))
        }
    }
}
