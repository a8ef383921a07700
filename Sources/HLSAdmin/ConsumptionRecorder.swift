import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSPlaylist
import HLSProxy
import Logging
import NIOConcurrencyHelpers
import NIOHTTP1

/// Records playback of items through the proxy (the offline SDKs' "record consumption") and counts cache hits.
///
/// ``observe(_:status:headers:)`` runs on the event loop for every proxied response and only appends the target to
/// a bounded list. ``flush(_:now:)`` (the admin loop, off the event loops) maps each served segment to the items that
/// play it and its position on their media timelines, records `lastPlayedAt` and the served seconds in
/// `items.sqlite`, and refreshes the last access of all the item's cache objects, so LRU eviction sees a played item
/// as recently used as a whole, not segment by segment.
///
/// Timelines are loaded only for items being played, at most ``maxLoadedItems`` of them (least recently played
/// dropped first): an item is found through its resource list (`item_resources`, indexed by key), which holds its
/// playlists and its precached segments. A player starts with the playlists, so segments past the precached part are
/// found too, on the timeline loaded then. Memory and start-up cost do not grow with the number of items.
///
/// Nothing served is lost to a failed write (`items.sqlite` busy beyond its timeout, a full disk): a flush that cannot
/// read the items or record a range puts its targets back for the next flush (recording a range twice changes
/// nothing: the served ranges are a union), within the same bound as new ones.
final class ConsumptionRecorder: Sendable {
    private struct Pending {
        /// Distinct targets served since the last flush (a set: a busy server answers the same few targets tens of
        /// thousands of times a second, and a list of every answer filled its bound within a second and dropped the
        /// rest).
        var targets: Set<String> = []
        /// The target added last: the next answer is usually for the same one (a player's reloads, many players of one
        /// stream), and the same string's storage compares equal without hashing it.
        var last = ""
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

    /// One item's loaded timeline.
    private struct Loaded {
        /// The renditions its playlists were read for (a change reloads).
        var renditions: [String]
        /// The segment keys it placed (to unload it).
        var keys: [String]
        /// The flush that last used it (for the bound).
        var lastUsed: UInt64
        /// Whether every one of its media playlists was stored when it was loaded; if not, it is loaded again the next
        /// time one of its resources is served (the playlist may be stored by then: a player fetched it).
        var complete: Bool
    }

    private struct Timelines {
        /// Segment cache key → placements, over the loaded items.
        var byKey: [String: [Placement]] = [:]
        var loaded: [String: Loaded] = [:]
        /// When each item's objects were last refreshed for LRU.
        var touchedAt: [String: Date] = [:]
        var flushes: UInt64 = 0

        mutating func unload(_ id: String) {
            guard let item = loaded.removeValue(forKey: id) else { return }
            for key in item.keys {
                guard var list = byKey[key] else { continue }
                list.removeAll { $0.item == id }
                byKey[key] = list.isEmpty ? nil : list
            }
        }

        mutating func load(_ id: String, renditions: [String], timeline: Timeline, bound: Int) {
            unload(id)
            for (key, placement) in timeline.placements { byKey[key, default: []].append(placement) }
            loaded[id] = Loaded(
                renditions: renditions, keys: Array(timeline.placements.keys), lastUsed: flushes, complete: timeline.complete)
            while loaded.count > bound, let oldest = loaded.min(by: { $0.value.lastUsed < $1.value.lastUsed })?.key {
                unload(oldest)
            }
        }
    }

    /// The most item timelines kept in memory.
    static let maxLoadedItems = 64

    private let store: CacheStore
    private let items: ItemStore
    private let volatileParameters: [String]
    private let maxPending = 16_384
    private let logger: Logger

    private struct Totals {
        /// Hits and misses flushed so far.
        var hits = 0
        var misses = 0
        /// Flushes that failed and were put back (for tests), and whether the last one failed (to log changes only).
        var failedFlushes = 0
        var failing = false
        /// Answers not recorded, past the pending bound (flushed so far).
        var dropped = 0
        /// Served targets looked up in the items' resource lists (tests: none while no item lists any).
        var mapped = 0
    }

    /// The served responses waiting for a flush, the loaded timelines and the totals, under one lock: every section
    /// is a few dictionary or counter updates (no SQLite, no file read, no logging inside).
    private struct State {
        var timelines = Timelines()
        var totals = Totals()
    }

    private let state = NIOLockedValueBox(State())

    /// What each event loop observed since the last flush, a box per loop (by its index, as ``ShardedCounts``): the
    /// loops do not share a lock on every response (one shared lock was ~2.5 % of a replayed playlist hit's CPU at 8
    /// connections, docs/benchmarks.md, issue 39). Each is bounded by `maxPending` targets.
    private let pendings: [NIOLockedValueBox<Pending>] = (0..<ShardedCounts.shards).map { _ in NIOLockedValueBox(Pending()) }

    private func withPending<T>(shard: Int = 0, _ body: (inout Pending) -> T) -> T {
        pendings[(shard & Int.max) % pendings.count].withLockedValue { body(&$0) }
    }

    /// The sum of `value` over the loops' pending observations (under the state lock, for a total that adds up).
    private func pendingSum(_ value: (Pending) -> Int) -> Int {
        pendings.reduce(0) { sum, box in sum + box.withLockedValue { value($0) } }
    }
    private func withTimelines<T>(_ body: (inout Timelines) -> T) -> T { state.withLockedValue { body(&$0.timelines) } }
    private func withTotals<T>(_ body: (inout Totals) -> T) -> T { state.withLockedValue { body(&$0.totals) } }

    init(store: CacheStore, items: ItemStore, volatileParameters: [String], logger: Logger = Logger(label: "hlscache.admin")) {
        self.store = store
        self.items = items
        self.volatileParameters = volatileParameters
        self.logger = logger
    }

    /// How many flushes could not record what was served and kept it for the next one (for tests).
    var failedFlushes: Int { withTotals { $0.failedFlushes } }

    /// Flushes so far, and the served targets they looked up in the items' resource lists (for tests).
    var flushesAndMappedTargets: (flushes: UInt64, mapped: Int) { state.withLockedValue { ($0.timelines.flushes, $0.totals.mapped) } }

    /// Cache hits and misses of proxied resources since the server started.
    var hitsAndMisses: (hits: Int, misses: Int) {
        state.withLockedValue { ($0.totals.hits + pendingSum(\.hits), $0.totals.misses + pendingSum(\.misses)) }
    }

    /// The items whose timelines are in memory (for tests).
    var loadedItems: Set<String> { withTimelines { Set($0.loaded.keys) } }

    /// Served answers not recorded as playback (more distinct targets than the pending bound between two flushes).
    var droppedAnswers: Int { state.withLockedValue { $0.totals.dropped + pendingSum(\.dropped) } }

    /// On the event loop: remember a successful response to a proxied resource.
    func observe(_ request: ProxyRequest, status: HTTPResponseStatus, headers: HTTPHeaders, shard: Int = 0) {
        let uri = request.head.uri
        // By case and by bytes: `==` on methods and `hasPrefix` compared strings, a tenth of this per response.
        let isGET = request.isGet
        guard isGET || request.isHead, Self.isProxiedTarget(uri) else { return }
        let cache = headers.first(name: "x-cache")
        guard status == .ok || status == .partialContent || cache != nil else { return }
        withPending(shard: shard) { p in
            if cache == "HIT" { p.hits += 1 } else if cache == "MISS" { p.misses += 1 }
            guard isGET, status == .ok || status == .partialContent else { return }
            guard uri != p.last else { return }
            if p.targets.count < maxPending {
                p.targets.insert(uri)
            } else if !p.targets.contains(uri) {
                p.dropped += 1
                return
            }
            p.last = uri
        }
    }

    /// Whether `uri` starts with `/http` (the proxied origin resources' prefix, ``ProxyPathRewriter``).
    static func isProxiedTarget(_ uri: String) -> Bool {
        // On the bytes in place: an iterator over the view (as `starts(with:)` and RequestRoute's `hasPrefix` use) cost
        // as much as `String.hasPrefix`.
        uri.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.count >= 5 && bytes[0] == UInt8(ascii: "/") && bytes[1] == UInt8(ascii: "h") && bytes[2] == UInt8(ascii: "t")
                && bytes[3] == UInt8(ascii: "t") && bytes[4] == UInt8(ascii: "p")
        } ?? uri.hasPrefix("/http")
    }

    /// Off the event loops: records what was served since the last flush.
    /// - Returns: the items played, with their updated records (for `played` events).
    func flush(_ changes: ItemChangeFeed.Changes, now: Date = Date()) -> [(String, ItemConsumption)] {
        // Under the state lock (then each loop's, in that order everywhere): a reader of the totals never sees what was
        // taken here missing from both.
        let taken = state.withLockedValue { s -> Pending in
            var taken = Pending()
            for box in pendings {
                box.withLockedValue { p in
                    taken.targets.formUnion(p.targets)
                    taken.hits += p.hits
                    taken.misses += p.misses
                    taken.dropped += p.dropped
                    p = Pending()
                }
            }
            s.totals.hits += taken.hits
            s.totals.misses += taken.misses
            s.totals.dropped += taken.dropped
            s.timelines.flushes += 1
            return taken
        }
        forgetChanged(changes)
        if taken.dropped > 0 {
            logger.warning(
                "admin: \(taken.dropped) served responses were not recorded as playback (more than \(maxPending) distinct targets waiting)")
        }
        guard !taken.targets.isEmpty else { return [] }
        do {
            let played = try record(taken.targets, now: now)
            noteRecovered()
            return played
        } catch {
            putBack(taken.targets, after: error)
            return []
        }
    }

    /// Maps `targets` to item timelines and records them.
    private func record(_ targets: Set<String>, now: Date) throws(DownloadError) -> [(String, ItemConsumption)] {
        // No item lists a resource (a plain proxy, or every item removed): nothing served is an item's, and a
        // library walked through would otherwise have every target parsed and looked up in each flush.
        guard try items.listsAnyResource() else { return [] }
        withTotals { $0.mapped += targets.count }
        var keys: Set<String> = []
        for target in targets {
            guard let url = try? OriginURL(proxyTarget: target) else { continue }
            keys.insert(CacheKey(url, volatileParameters: volatileParameters).value)
        }
        try loadTimelines(listing: keys)
        let byKey = withTimelines { t -> [String: [Placement]] in
            var found: [String: [Placement]] = [:]
            for key in keys {
                guard let placements = t.byKey[key] else { continue }
                found[key] = placements
                for placement in placements { t.loaded[placement.item]?.lastUsed = t.flushes }
            }
            return found
        }
        var ranges: [String: [(Double, Double)]] = [:]
        for placements in byKey.values {
            for placement in placements { ranges[placement.item, default: []].append((placement.start, placement.end)) }
        }
        var played: [(String, ItemConsumption)] = []
        var failure: DownloadError?
        for (id, list) in ranges {
            do {
                for (start, end) in list { try items.recordPlayback(id, start: start, end: end, at: now) }
            } catch {
                failure = error
                continue
            }
            touchObjects(of: id, now: now)
            if let record = try? items.consumption(id) { played.append((id, record)) }
        }
        if let failure { throw failure }
        return played
    }

    /// Keeps the targets of a failed flush for the next one, ahead of newer ones, within the pending bound.
    private func putBack(_ targets: Set<String>, after error: DownloadError) {
        withPending { p in
            var kept = targets
            for target in p.targets where kept.count < maxPending { kept.insert(target) }
            p.dropped += p.targets.subtracting(kept).count
            p.targets = kept
            p.last = ""
        }
        let first = withTotals { totals -> Bool in
            defer {
                totals.failedFlushes += 1
                totals.failing = true
            }
            return !totals.failing
        }
        if first { logger.warning("admin: cannot record playback yet, will retry: \(error)") }
    }

    private func noteRecovered() {
        let was = withTotals { totals -> Bool in
            defer { totals.failing = false }
            return totals.failing
        }
        if was { logger.notice("admin: recording playback again") }
    }

    /// Drops the timelines of removed, deleted and expired items and of items whose renditions changed (they are
    /// loaded again when next played).
    private func forgetChanged(_ changes: ItemChangeFeed.Changes) {
        guard !changes.removed.isEmpty || !changes.changed.isEmpty else { return }
        withTimelines { t in
            for id in changes.removed {
                t.unload(id)
                t.touchedAt[id] = nil
            }
            for item in changes.changed {
                guard let loaded = t.loaded[item.id] else { continue }
                if item.state == .deleted || item.state == .expired || loaded.renditions != item.renditions { t.unload(item.id) }
            }
        }
    }

    /// Loads the timelines of the items listing any of `keys` (a playlist or a precached segment) that are not loaded
    /// yet; an item with a media playlist missing from the store (none stored yet, evicted, or being replaced at that
    /// instant) is loaded again the next time one of its resources is served.
    private func loadTimelines(listing keys: Set<String>) throws(DownloadError) {
        let listed = try items.items(listing: keys)
        let loaded = withTimelines { Set($0.loaded.filter(\.value.complete).keys) }
        var wanted: [String] = []
        var seen = loaded
        for ids in listed.values {
            for id in ids where seen.insert(id).inserted { wanted.append(id) }
        }
        for id in wanted.sorted().prefix(Self.maxLoadedItems) {
            guard let item = try items.item(id), item.state != .deleted, item.state != .expired,
                let timeline = timeline(of: item)
            else { continue }
            withTimelines { $0.load(id, renditions: item.renditions, timeline: timeline, bound: Self.maxLoadedItems) }
        }
    }

    /// An item's segments on its media timeline, as far as its stored media playlists tell.
    struct Timeline {
        /// Segment cache key → placement.
        var placements: [String: Placement] = [:]
        /// Whether every media playlist of the item was stored.
        var complete = true
    }

    /// The placements of every stored media playlist of the item; `nil` until one is stored.
    private func timeline(of item: DownloadItem) -> Timeline? {
        let playlists = item.renditions.isEmpty ? [item.url] : item.renditions
        var timeline = Timeline()
        var foundAny = false
        for playlistURL in playlists {
            guard let url = try? OriginURL(playlistURL), let object = store.lookup(CacheKey(url, volatileParameters: volatileParameters)),
                object.kind == .playlist, let data = FileManager.default.contents(atPath: object.path),
                let playlist = try? Playlist(bytes: [UInt8](data)), playlist.kind == .media,
                let media = try? playlist.media(baseURL: object.location ?? url.string)
            else {
                timeline.complete = false
                continue
            }
            foundAny = true
            for segment in media.segments {
                guard let segmentURL = try? OriginURL(segment.url) else { continue }
                let key = CacheKey(segmentURL, volatileParameters: volatileParameters).value
                let end = segment.startTime + segment.duration
                if var existing = timeline.placements[key] {
                    // Byte ranges of one file: the file covers all of them.
                    existing.start = min(existing.start, segment.startTime)
                    existing.end = max(existing.end, end)
                    timeline.placements[key] = existing
                } else {
                    timeline.placements[key] = Placement(item: item.id, start: segment.startTime, end: end)
                }
            }
        }
        return foundAny ? timeline : nil
    }

    /// Marks every object of the item as just used (at most once a minute per item).
    private func touchObjects(of id: String, now: Date) {
        let due = withTimelines { t -> Bool in
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
