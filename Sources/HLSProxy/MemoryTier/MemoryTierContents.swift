import HLSCacheCore

/// What the memory tier holds and what it lets in (docs/architecture.md, "The memory tier"). Pure: no clock of its
/// own, no I/O; ``MemoryTier`` keeps it under its lock and tells it the time.
///
/// Two rules keep what is hot whatever the segments do:
/// - **Small objects have their own room.** Objects of at most ``smallObjectBytes`` (playlists, init sections,
///   short segments) may always use ``smallBudget`` bytes, taking them from large entries if they must; large
///   entries never evict a small one. A pass over gigabytes of segments cannot push out a 2 KB playlist refreshed
///   every few seconds — the smallest and hottest object of HLS.
/// - **Frequency decides who enters when something must leave** (TinyLFU admission, ``FrequencySketch``): every
///   request for an object is counted, held or not. An object enters once it was asked for at least twice; when
///   room must be made, it enters only if it was asked for more often than every entry it would evict (the least
///   recently used first), not counting the request asking now. A loop over a working set larger than the tier then
///   keeps a stable part of it in memory and sends the rest from the files, instead of reading each object in just
///   before evicting it (plain LRU reads every object and hits none); in a Zipf-shaped library the popular objects
///   win their place. The decision is made before anything is read, so an object that would not enter is never read
///   into memory.
///
/// Frequency protects an entry only while it is in use: one not asked for in ``idleAfter`` counts as never asked
/// for, so the segments of a live channel that left its window (asked for thousands of times, never again) give
/// their place to the new live edge at once rather than after the sketch's next halving. That time is the tier's
/// time in use (``inUse``): a pause between two requests counts for at most ``pauseCounted``, so a library nobody
/// asked for during a lunch break is not idle when its viewers come back — on wall-clock time every entry then
/// counted as never asked for, and the first pass after the pause read the whole tier in again.
struct MemoryTierContents<Value> {
    /// An entry, its cost and when it was last asked for (``inUse`` then).
    struct Entry {
        var value: Value
        var cost: Int
        var lastUsed: UInt64
    }

    /// The most bytes held in all (entries' costs).
    let maxBytes: Int
    /// Bytes small entries may always use.
    let smallBudget: Int
    /// Objects whose cost is at most this are small.
    let smallCost: Int
    /// Asked for fewer times than this (in the sketch's memory), an object does not enter.
    static var minimumFrequency: Int { 2 }
    /// An entry not asked for in this long of the tier's time in use (``inUse``) counts as never asked for
    /// (nanoseconds).
    let idleAfter: UInt64
    /// The most a pause between two requests adds to ``inUse`` (nanoseconds).
    static var pauseCounted: UInt64 { 1_000_000_000 }
    /// The tier's time in use: nanoseconds between the requests it was told of, a pause counting at most
    /// ``pauseCounted``.
    private(set) var inUse: UInt64 = 0
    /// The latest time (of the caller's clock) the tier was told of.
    private var lastSeen: UInt64?

    private var small: BoundedLRU<CacheKey, Entry>
    private var large: BoundedLRU<CacheKey, Entry>
    private var sketch: FrequencySketch

    /// - Parameters:
    ///   - maxBytes: the most bytes held (0: nothing is).
    ///   - smallCost: entries of at most this cost are small.
    ///   - smallBudget: bytes small entries may always use (at most `maxBytes`).
    ///   - maxCount: the most entries held in each region.
    ///   - idleAfter: nanoseconds of use (``inUse``) after which an entry no longer asked for counts as never asked for.
    init(maxBytes: Int, smallCost: Int, smallBudget: Int, maxCount: Int, idleAfter: UInt64) {
        self.maxBytes = max(0, maxBytes)
        self.smallCost = smallCost
        self.smallBudget = min(max(0, smallBudget), self.maxBytes)
        self.idleAfter = idleAfter
        small = BoundedLRU(maxCount: maxCount, maxCost: self.smallBudget)
        large = BoundedLRU(maxCount: maxCount, maxCost: self.maxBytes)
        // About one counter per entry the tier could hold at 32 KiB each, within 1k...64k per row (4 rows).
        sketch = FrequencySketch(width: min(max(self.maxBytes / (32 << 10), 1024), 1 << 16))
    }

    // MARK: - Requests

    /// Counts one request for `key`, held or not, made at `now` (nanoseconds of the caller's monotonic clock).
    mutating func recordRequest(_ key: CacheKey, now: UInt64) {
        sketch.increment(key.hashValue)
        advance(to: now)
    }

    /// Moves ``inUse`` on to `now` (a time earlier than one seen already moves nothing).
    private mutating func advance(to now: UInt64) {
        guard let lastSeen else {
            lastSeen = now
            return
        }
        guard now > lastSeen else { return }
        inUse &+= min(now - lastSeen, Self.pauseCounted)
        self.lastSeen = now
    }

    /// How often `key` was asked for lately (the sketch's estimate).
    func frequency(_ key: CacheKey) -> Int {
        sketch.frequency(key.hashValue)
    }

    /// The value held for `key`, marked as asked for at `now` (and made the most recent of its region).
    mutating func value(forKey key: CacheKey, now: UInt64) -> Value? {
        advance(to: now)
        let used = inUse
        if let value = small.touchValue(
            forKey: key,
            { entry -> Value in
                entry.lastUsed = used
                return entry.value
            })
        {
            return value
        }
        return large.touchValue(forKey: key) { entry -> Value in
            entry.lastUsed = used
            return entry.value
        }
    }

    /// The value held for `key`, leaving the order as it is.
    func peekValue(forKey key: CacheKey) -> Value? {
        small.peekValue(forKey: key)?.value ?? large.peekValue(forKey: key)?.value
    }

    // MARK: - Admission

    /// Whether an object of `cost` bytes for `key` would enter now (``insert(_:forKey:cost:now:outside:)`` decides
    /// again: the contents may have changed while it was read).
    /// - Parameter outside: bytes of the tier's held outside the entries (copies being read in, evicted copies still
    ///   being sent), which count against ``maxBytes`` too.
    func admits(_ key: CacheKey, cost: Int, outside: Int = 0) -> Bool {
        plan(for: key, cost: cost, outside: outside) != nil
    }

    /// Evicts what must leave so that an object of `cost` bytes for `key` fits beside `outside` bytes, if it is
    /// admitted now; its copy can then be read in without the tier's bytes going past ``maxBytes`` meanwhile (count
    /// it in `outside` until it is inserted).
    /// - Returns: whether it is admitted.
    mutating func makeRoom(for key: CacheKey, cost: Int, outside: Int) -> Bool {
        guard let plan = plan(for: key, cost: cost, outside: outside) else { return false }
        for victim in plan.small { small.removeValue(forKey: victim) }
        for victim in plan.large { large.removeValue(forKey: victim) }
        return true
    }

    /// Puts `value` in for `key` if it is admitted now beside `outside` bytes held outside the entries, evicting what
    /// must leave for it.
    /// - Returns: whether it entered.
    @discardableResult
    mutating func insert(_ value: Value, forKey key: CacheKey, cost: Int, now: UInt64, outside: Int = 0) -> Bool {
        advance(to: now)
        guard let plan = plan(for: key, cost: cost, outside: outside) else { return false }
        removeValue(forKey: key)
        for victim in plan.small { small.removeValue(forKey: victim) }
        for victim in plan.large { large.removeValue(forKey: victim) }
        let entry = Entry(value: value, cost: cost, lastUsed: inUse)
        if isSmall(cost) {
            small.setValue(entry, forKey: key, cost: cost)
        } else {
            large.setValue(entry, forKey: key, cost: cost)
        }
        return true
    }

    private func isSmall(_ cost: Int) -> Bool { cost <= smallCost }

    /// The entries to evict so that `key` (`cost` bytes) fits beside `outside` bytes held outside the entries, or nil
    /// if it may not enter: asked for too rarely, too large for its room, or not asked for more often than an entry it
    /// would have to evict.
    ///
    /// Against an entry it would evict, the object is weighed on the requests it had *before* the one asking now (the
    /// caller counts that one first): an entry's count holds only requests that were made, and the entry's next
    /// request has not come yet. Counting it in the object's favour made every object of a loop look one request more
    /// popular than the least recent entry — the one asked for longest ago, whose next request is due — and a loop
    /// read each object in just before evicting it, as plain LRU does
    /// (`MemoryTierContentsTests.viewersWalkingALoopOutOfStepStopReadingOnceSettled`).
    private func plan(for key: CacheKey, cost: Int, outside: Int) -> (small: [CacheKey], large: [CacheKey])? {
        let frequency = sketch.frequency(key.hashValue)
        guard frequency >= Self.minimumFrequency, cost > 0 else { return nil }
        // What the object is weighed on against the entries it would evict.
        let earlier = frequency - 1
        // A new version of a held object replaces it: its bytes are free.
        let heldSmall = small.peekValue(forKey: key)?.cost ?? 0
        let heldLarge = large.peekValue(forKey: key)?.cost ?? 0
        if isSmall(cost) {
            guard cost <= smallBudget else { return nil }
            // Within the small room, frequency decides.
            guard
                let smallVictims = victims(
                    in: small, toFree: small.totalCost - heldSmall + cost - smallBudget, excluding: key, frequency: earlier)
            else { return nil }
            // Then the whole: small entries take what they need from large ones, whatever those are worth.
            let smallAfter = small.totalCost - heldSmall - smallVictims.freed + cost
            let excess = smallAfter + large.totalCost - heldLarge + outside - maxBytes
            let largeVictims = leastRecent(in: large, toFree: excess, excluding: key)
            return (smallVictims.keys, largeVictims)
        }
        guard cost + max(0, outside) <= maxBytes - small.totalCost + heldSmall else { return nil }
        guard
            let largeVictims = victims(
                in: large, toFree: small.totalCost - heldSmall + large.totalCost - heldLarge + cost + outside - maxBytes, excluding: key,
                frequency: earlier)
        else { return nil }
        return ([], largeVictims.keys)
    }

    /// The least recent entries of `region` (but `key`) that free `bytes`, if each was asked for less often than
    /// `frequency` (an idle one counts 0); nil if one was not.
    private func victims(
        in region: BoundedLRU<CacheKey, Entry>, toFree bytes: Int, excluding key: CacheKey, frequency: Int
    ) -> (keys: [CacheKey], freed: Int)? {
        guard bytes > 0 else { return ([], 0) }
        var keys: [CacheKey] = []
        var freed = 0
        var admitted = true
        region.forEachLeastRecentFirst { victim, entry, cost in
            if victim == key { return true }
            let idle = inUse &- entry.lastUsed > idleAfter
            if !idle && sketch.frequency(victim.hashValue) >= frequency {
                admitted = false
                return false
            }
            keys.append(victim)
            freed += cost
            return freed < bytes
        }
        return admitted && freed >= bytes ? (keys, freed) : nil
    }

    /// The least recent entries of `region` (but `key`) that free `bytes`, whatever they are worth.
    private func leastRecent(in region: BoundedLRU<CacheKey, Entry>, toFree bytes: Int, excluding key: CacheKey) -> [CacheKey] {
        guard bytes > 0 else { return [] }
        var keys: [CacheKey] = []
        var freed = 0
        region.forEachLeastRecentFirst { victim, _, cost in
            if victim == key { return true }
            keys.append(victim)
            freed += cost
            return freed < bytes
        }
        return keys
    }

    // MARK: - Removal and totals

    /// Drops `key`'s entry.
    @discardableResult
    mutating func removeValue(forKey key: CacheKey) -> Value? {
        small.removeValue(forKey: key)?.value ?? large.removeValue(forKey: key)?.value
    }

    /// Bytes held (entries' costs).
    var totalCost: Int { small.totalCost + large.totalCost }
    /// Entries held.
    var count: Int { small.count + large.count }
    /// Bytes held by small entries.
    var smallCostHeld: Int { small.totalCost }
}

extension MemoryTierContents: Sendable where Value: Sendable {}

extension MemoryTierContents.Entry: Sendable where Value: Sendable {}
