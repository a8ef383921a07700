#if canImport(Glibc)
    import Glibc
#endif
import HLSCacheCore
import HLSCacheStore
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Synchronization

/// Small hot objects of the disk cache held in memory (`cache.memorySize`), so that a hit on one is one `writev` of
/// a head rendered earlier and the bytes, with no file opened, read or closed per request (docs/architecture.md,
/// "The memory tier"). The disk cache stays the truth: an entry is only a copy of one version of one object file.
///
/// - **What enters:** a whole object of at most ``maxObjectBytes`` asked for at least twice, and — when room must be
///   made — asked for more often than every entry it would evict, not counting the request asking now, idleness
///   counted in the tier's time in use (``MemoryTierContents``: TinyLFU admission over a frequency sketch, with a
///   room of its own for small objects so that segments never push a playlist out). The
///   decision is taken before the object is read, and the read runs on the thread pool, never on a request's path:
///   a hit that misses the tier is sent from its file at once, and an object that would not enter is never read.
///   Larger objects never enter: memory never grows with the size of an object.
/// - **Bounds:** ``maxBytes`` in all (the bodies plus a fixed overhead per entry), counting with the entries the copies
///   being read in (room is made for a copy before its read starts) and evicted copies a connection still holds for a
///   large send (``LargeSendHold``): what the process holds for the tier never passes the bound.
/// - **Validity:** an entry answers only for the version it was read from (same key, entity tag and size as the
///   store's current row, which the caller checks with ``CacheStore/touchIfUnchanged(_:)``), and only while the
///   object's file is still the file it was read from (``FileIdentity``: same inode, size and modification time):
///   another process (`hlscache fetch`) that replaced it, or a hand that truncated it, sends the request to the
///   disk path, which deals with it. The file is looked at again at most once per ``recheckInterval`` per entry
///   (a `stat` per hit was 7 % of a playlist hit's CPU); in between the copy is served — a whole, consistent copy
///   of the version whose head goes with it. Evicted objects leave at once (``CacheStore/onEviction(_:)``);
///   replaced, removed or expired ones are dropped when next asked for, or age out.
/// - **Large bodies:** a body over ``alwaysFromMemoryBytes`` goes from memory while its copy is *warm*: fewer than
///   ``maxLargeSends`` other connections hold a large body — sent from memory or from its file, from the send until
///   the connection's next request or its end (``bodyToSend(of:on:alone:headOnly:counted:)``, ``requestBegan(on:)``,
///   ``connectionEnded(_:)``) — and, on an event loop that serves other connections too, fewer than ``warmBytes`` of
///   other large bodies were sent (from memory or from their files) since it last went from memory or was read in.
///   A warm copy is read back by a loopback receiver while still in the CPU's caches: half the system CPU of a
///   `sendfile` of a 2 MiB hit at 1–8 connections (docs/benchmarks.md, issue 26). The end of the write is not the
///   signal: the kernel takes a whole 2 MiB body into its socket buffers at once, long before the receiver has read it.
///   A connection alone on its loop waits for nobody, and there memory is faster even for a cold copy.
/// - **Cold copies by the load:** otherwise the copy is *cold*. Beside a connection waiting for a playlist it takes its
///   file: a copy out of memory takes the loop's time and the caches from the playlists. Where every connection on
///   the loop holds a large body (``LargeSendHold/loopCarriesOnlyLargeSends``: nobody there waits for a small
///   answer), `cache.memoryColdSends` decides (``ColdSendMode``): by default from memory while fewer than
///   ``maxLargeSends`` other connections hold a large body — the receiver reads the copy while it is still in the
///   caches — and from its file past that, where the copies no longer stay there until read.
final class MemoryTier: Sendable {
    /// The most bytes held (bodies plus ``entryOverhead`` each); 0 disables the tier.
    let maxBytes: Int
    /// Larger objects never enter.
    let maxObjectBytes: Int
    /// Counted per entry on top of its body (the entry, its key, the table's slot).
    static let entryOverhead = 512
    /// Reads in flight at once; an object asked for while this many are under way is read on a later hit.
    static let maxLoads = 8
    /// An entry not asked for in this long of the tier's time in use counts as never asked for when room is made
    /// (``MemoryTierContents/inUse``: a pause between requests counts for at most a second).
    static let idleAfter = TimeAmount.seconds(30)
    /// Bodies of at most this many bytes (playlists, init sections, short segments) are always sent from memory when
    /// held; larger ones only while fewer than ``maxLargeSends`` connections hold one.
    static let alwaysFromMemoryBytes = 64 << 10
    /// How long an entry's file is taken to be unchanged after it was looked at (another process replacing it is
    /// noticed within this long).
    static let recheckInterval = TimeAmount.seconds(1)
    /// Large bodies from memory only while fewer than this many other connections hold a large body
    /// (`cache.memoryLargeSends`); 0: large bodies always take their file.
    let maxLargeSends: Int
    /// How cold large copies are sent (`cache.memoryColdSends`).
    let coldSends: ColdSendMode
    /// Connections holding a large body (each counted once: ``LargeSendHolding/holdsLargeSend``).
    private let largeSends = Synchronization.Atomic<Int>(0)
    /// A large copy counts as warm while fewer than this many bytes of other large bodies were sent (from memory or
    /// from their files) since it last went from memory (``bodyToSend(of:on:alone:headOnly:counted:)``): about half
    /// a server CPU's last-level cache.
    static let defaultWarmBytes = 16 << 20
    let warmBytes: Int
    /// Bytes of large bodies sent so far, from memory or from their files: the clock ``MemoryObject/lastSent`` is read
    /// against.
    private let largeBytesSent = Synchronization.Atomic<Int>(0)
    /// Reads started (``load(_:store:threadPool:)``; tests).
    private let loadsStarted = Synchronization.Atomic<Int>(0)
    /// Cold large copies sent from memory, and from their files (``coldSendCounts``).
    private let coldFromMemory = Synchronization.Atomic<Int>(0)
    private let coldFromFile = Synchronization.Atomic<Int>(0)
    /// The monotonic clock the file re-checks are timed by (tests move it by hand).
    private let now: @Sendable () -> NIODeadline

    private struct State {
        var entries: MemoryTierContents<MemoryObject>
        var loading: Set<CacheKey> = []
        /// Bytes (costs) of the copies being read in: room was made for them.
        var loadingBytes = 0
    }

    /// Bytes (costs) of the copies that entered and are still alive: held, or evicted and still held by a connection
    /// for a large send (``LargeSendHold/keep(_:)``).
    private let alive = MemoryObject.Alive()

    /// Bytes the tier holds outside its entries: copies being read in, evicted copies still being sent (under the lock).
    private func outside(_ state: State) -> Int {
        max(0, alive.bytes - state.entries.totalCost) + state.loadingBytes
    }

    private let state: NIOLockedValueBox<State>
    /// The store's `objects/` folder, opened once: an entry's file is checked with `fstatat` on its path relative to
    /// it (two components to walk instead of the whole path; walking it was most of what a `stat` cost).
    private let objects: (prefix: String, descriptor: Int32)?

    /// - Parameters:
    ///   - directory: the cache directory (`objects/` is looked up in it).
    ///   - now: the clock of the file re-checks (``recheckInterval``).
    init(
        maxBytes: Int, maxObjectBytes: Int, maxLargeSends: Int = 8, warmBytes: Int = MemoryTier.defaultWarmBytes,
        coldSends: ColdSendMode = .auto,
        directory: String, now: @escaping @Sendable () -> NIODeadline = { .now() }
    ) {
        self.now = now
        self.warmBytes = max(0, warmBytes)
        self.maxLargeSends = max(0, maxLargeSends)
        self.coldSends = coldSends
        let objectsPath = (directory.hasSuffix("/") ? directory : directory + "/") + "objects"
        let descriptor = maxBytes > 0 ? open(objectsPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1
        objects = descriptor >= 0 ? (objectsPath + "/", descriptor) : nil
        self.maxBytes = max(0, maxBytes)
        self.maxObjectBytes = min(max(0, maxObjectBytes), max(0, maxBytes - Self.entryOverhead))
        // Every entry costs at least its overhead, so the count bound follows from the byte bound.
        let maxCount = maxBytes > 0 ? max(1, maxBytes / Self.entryOverhead) : 0
        state = NIOLockedValueBox(
            State(
                entries: MemoryTierContents(
                    maxBytes: self.maxBytes, smallCost: Self.alwaysFromMemoryBytes + Self.entryOverhead,
                    smallBudget: Self.smallBudget(of: self.maxBytes), maxCount: maxCount,
                    idleAfter: UInt64(Self.idleAfter.nanoseconds))))
    }

    deinit {
        if let objects { close(objects.descriptor) }
    }

    var isEnabled: Bool { maxObjectBytes > 0 }

    /// Which file `path` names now (relative to `objects/` when it is in it).
    private func identity(of path: String, relative: String?) -> FileIdentity? {
        guard let objects, let relative else { return FileIdentity(path: path) }
        return FileIdentity(relativePath: relative, in: objects.descriptor)
    }

    /// Whether `object` may enter at all: small enough, and not a key (or what looks like one: keys are served by
    /// `/keys/` from their sealed store, and their bytes are kept in memory nowhere else).
    func admits(_ object: CachedObject) -> Bool {
        isEnabled && object.size <= Int64(maxObjectBytes) && object.kind != .key && !KeySizedBody.isKeySize(object.size)
    }

    /// Bytes small objects (at most ``alwaysFromMemoryBytes``) may always use: an eighth of the tier, at least
    /// 4 MiB (or the whole tier when it is smaller) — some thousands of playlists.
    static func smallBudget(of maxBytes: Int) -> Int {
        max(maxBytes / 8, min(maxBytes, 4 << 20))
    }

    /// The bytes of `object` (the version the caller found current in the store), if held and its file is still the
    /// one they were read from (looked at again once ``recheckInterval`` passed since it last was). A stale entry
    /// (another version, another file) is dropped.
    /// - Parameter counted: whether this request was counted already (``bodyToSend(of:on:alone:headOnly:counted:)``);
    ///   set when it is.
    private func body(of object: CachedObject, counted: inout Bool) -> ByteBuffer? {
        entry(of: object, counted: &counted)?.body
    }

    /// For a replayed hit of a small object (at most ``alwaysFromMemoryBytes``: no large-send accounting), as
    /// ``bodyToSend(of:on:alone:headOnly:counted:)`` looks it up: its entry, and the tier clock's time
    /// (``clock``) until which the entry's file needs no new look (``recheckInterval``) — until then, and while the
    /// entry is held, the same bytes may be sent again for the same version without asking (``ReplayCheck``).
    func smallEntry(of object: CachedObject, counted: inout Bool) -> (entry: MemoryObject, fileCheckedUntil: UInt64)? {
        guard isEnabled, object.size <= Int64(Self.alwaysFromMemoryBytes), let found = entry(of: object, counted: &counted) else {
            return nil
        }
        return (found, found.checkedAt.load(ordering: .relaxed) &+ UInt64(Self.recheckInterval.nanoseconds))
    }

    /// The clock the entries' file checks are timed by, in nanoseconds (``NIODeadline/uptimeNanoseconds``).
    var clock: UInt64 { now().uptimeNanoseconds }

    /// The entry of ``body(of:counted:)``.
    private func entry(of object: CachedObject, counted: inout Bool) -> MemoryObject? {
        let time = now().uptimeNanoseconds
        let count = !counted
        counted = true
        let found = state.withLockedValue { state -> MemoryObject? in
            if count { state.entries.recordRequest(object.key, now: time) }
            guard let entry = state.entries.value(forKey: object.key, now: time) else { return nil }
            guard entry.etag == object.etag, entry.size == object.size else {
                state.entries.removeValue(forKey: object.key)
                return nil
            }
            return entry
        }
        guard let found else { return nil }
        if time &- found.checkedAt.load(ordering: .relaxed) < UInt64(Self.recheckInterval.nanoseconds) { return found }
        guard identity(of: object.path, relative: found.relativePath) == found.file else {
            state.withLockedValue { state in
                if state.entries.peekValue(forKey: object.key) === found { state.entries.removeValue(forKey: object.key) }
            }
            return nil
        }
        found.checkedAt.store(time, ordering: .relaxed)
        return found
    }

    /// The bytes of `object` for a response about to be written on `connection`, or nil: send its file. The request
    /// is counted (once: `counted` says whether it was, and is set) whether or not the object is held — what decides
    /// what enters. A body over ``alwaysFromMemoryBytes`` makes `connection` hold a large send until its next request
    /// (``requestBegan(on:)``) or its end (``connectionEnded(_:)``), and is given only while fewer than
    /// ``maxLargeSends`` other connections hold one and — unless `connection` is `alone` on its event loop — while
    /// the copy is warm (``warmBytes``); a cold copy is given, where every connection on the loop holds a large body,
    /// if ``coldSends`` says memory (``ColdSendMode/fromMemory(crowded:)``). `cache.memoryLargeSends` 0: never.
    /// - Parameters:
    ///   - alone: no other connection shares the event loop `connection` is served on.
    ///   - headOnly: no body will be written (HEAD): not counted as a large send.
    func bodyToSend(
        of object: CachedObject, on connection: LargeSendHold?, alone: Bool = true, headOnly: Bool = false, counted: inout Bool
    ) -> ByteBuffer? {
        guard isEnabled else { return nil }
        guard object.size > Int64(Self.alwaysFromMemoryBytes), !headOnly else { return body(of: object, counted: &counted) }
        guard let connection else {
            countRequest(object, counted: &counted)
            return nil
        }
        let others =
            connection.take()
            ? largeSends.wrappingAdd(1, ordering: .relaxed).oldValue
            : largeSends.load(ordering: .relaxed) - 1
        guard maxLargeSends > 0 else {
            countRequest(object, counted: &counted)
            return nil
        }
        guard let entry = entry(of: object, counted: &counted) else { return nil }
        // A cold copy — many large bodies in flight, or where other connections wait for this loop and the copy was
        // not sent lately: memory or file by the load (``ColdSendMode``).
        let sent = largeBytesSent.load(ordering: .relaxed)
        let crowded = others >= maxLargeSends
        if crowded || (!alone && sent &- entry.lastSent.load(ordering: .relaxed) > warmBytes) {
            // Where a connection on this loop waits for small answers, its file: a copy out of memory takes the loop's
            // time and caches from the playlists (docs/benchmarks.md, issue 39).
            guard connection.loopCarriesOnlyLargeSends, coldSends.fromMemory(crowded: crowded) else {
                coldFromFile.wrappingAdd(1, ordering: .relaxed)
                return nil
            }
            coldFromMemory.wrappingAdd(1, ordering: .relaxed)
        }
        entry.lastSent.store(largeBytesSent.wrappingAdd(Int(object.size), ordering: .relaxed).newValue, ordering: .relaxed)
        // Kept until the connection's next request or its end: evicted meanwhile, it still counts against the bound.
        connection.keep(entry)
        return entry.body
    }

    /// A body of `object` is sent from its file: a large one counts in what makes copies cold (``warmBytes``), as
    /// every large body passes through the CPU's caches, from memory or from its file. Called once per response that
    /// takes the file (a request may ask ``bodyToSend(of:on:alone:headOnly:counted:)`` twice first).
    func sendingFile(of object: CachedObject, headOnly: Bool) {
        guard isEnabled, !headOnly, object.size > Int64(Self.alwaysFromMemoryBytes) else { return }
        largeBytesSent.wrappingAdd(Int(object.size), ordering: .relaxed)
    }

    /// Counts a request for `object` that will not be sent the tier's copy, unless it was counted. A held copy is
    /// marked as asked for all the same: it is in use, only sent from its file this time (past ``maxLargeSends``) —
    /// left unmarked, copies asked for all the time aged as if nobody wanted them (``MemoryTierContents/idleAfter``)
    /// and gave their places to objects asked for less.
    private func countRequest(_ object: CachedObject, counted: inout Bool) {
        guard !counted else { return }
        counted = true
        let time = now().uptimeNanoseconds
        state.withLockedValue { state in
            state.entries.recordRequest(object.key, now: time)
            _ = state.entries.value(forKey: object.key, now: time)
        }
    }

    /// A new request began on `connection`: the large body it was last sent has been read (a client asks again once
    /// it has its answer), so it no longer counts.
    func requestBegan(on connection: LargeSendHold) {
        if connection.release() { largeSends.wrappingSubtract(1, ordering: .relaxed) }
    }

    /// `connection` is closed: what it held no longer counts.
    func connectionEnded(_ connection: LargeSendHold) {
        requestBegan(on: connection)
    }

    /// Reads into the tier started so far (`hlscache_memory_tier_reads_total`, tests).
    var reads: Int {
        loadsStarted.load(ordering: .relaxed)
    }

    /// Cold large copies sent so far from memory, and from their files (`hlscache_memory_cold_sends_total`, tests):
    /// counted when the way is chosen (a replayed hit whose file went away, answered again the ordinary way, counts
    /// twice).
    var coldSendCounts: (memory: Int, file: Int) {
        (coldFromMemory.load(ordering: .relaxed), coldFromFile.load(ordering: .relaxed))
    }

    /// Connections holding a large body (`hlscache_memory_large_sends`, tests).
    var largeSendsInFlight: Int {
        largeSends.load(ordering: .relaxed)
    }

    /// Reads `object` in on `threadPool` if it would enter (``MemoryTierContents``: asked for often enough, and
    /// more often than what it would evict) and is not held, being read, too large, nor past ``maxLoads`` reads under
    /// way. The read checks that the file is the object's (its size); what it read enters only if the store still
    /// has that version and the tier still admits it.
    ///
    /// A large body (over ``alwaysFromMemoryBytes``) is not read while ``maxLargeSends`` other connections or more
    /// hold a large body (nor ever with ``maxLargeSends`` 0), unless cold copies are sent from memory then
    /// (``ColdSendMode/fromMemory(crowded:)``): otherwise its hits take the file then, and a copy read now would cost a read of
    /// the whole object and its room in the tier for nothing (at 64 connections over a library, the reads alone made
    /// hits slower than with the tier off — docs/benchmarks.md, issue 39).
    func load(_ object: CachedObject, store: CacheStore, threadPool: NIOThreadPool) {
        guard admits(object) else { return }
        // The connection asking holds a large send itself (taken by ``bodyToSend(of:on:alone:headOnly:counted:)``): others
        // are one fewer, as there.
        guard
            object.size <= Int64(Self.alwaysFromMemoryBytes)
                || (maxLargeSends > 0 && (largeSends.load(ordering: .relaxed) <= maxLargeSends || coldSends.fromMemory(crowded: true)))
        else { return }
        let cost = Int(object.size) + Self.entryOverhead
        // Room is made before the read: the copy counts against the bound while it is read in.
        let start = state.withLockedValue { state -> Bool in
            if let held = state.entries.peekValue(forKey: object.key), held.etag == object.etag, held.size == object.size { return false }
            guard state.loading.count < Self.maxLoads, !state.loading.contains(object.key),
                state.entries.makeRoom(for: object.key, cost: cost, outside: outside(state))
            else { return false }
            state.loading.insert(object.key)
            state.loadingBytes += cost
            return true
        }
        guard start else { return }
        loadsStarted.wrappingAdd(1, ordering: .relaxed)
        threadPool.submit { [self] work in
            let relative = objects.flatMap { object.path.hasPrefix($0.prefix) ? String(object.path.dropFirst($0.prefix.utf8.count)) : nil }
            let readAt = now()
            var loaded: MemoryObject?
            // Still the store's version (not replaced, evicted or expired while it was read)?
            if work == .active, let read = MemoryObject.read(object, relativePath: relative, at: readAt, cost: cost),
                store.isCurrent(object)
            {
                // Just read: warm.
                read.lastSent.store(largeBytesSent.load(ordering: .relaxed), ordering: .relaxed)
                loaded = read
            }
            state.withLockedValue { state in
                state.loading.remove(object.key)
                state.loadingBytes -= cost
                guard let loaded,
                    state.entries.insert(loaded, forKey: object.key, cost: cost, now: readAt.uptimeNanoseconds, outside: outside(state))
                else { return }
                loaded.entered(counting: alive)
            }
        }
    }

    /// Drops the entries of `keys` (the store evicted them).
    func remove(_ keys: [CacheKey]) {
        guard isEnabled else { return }
        state.withLockedValue { state in
            for key in keys { state.entries.removeValue(forKey: key) }
        }
    }

    /// Bytes and entries held (`hlscache_memory_tier_bytes`, `hlscache_memory_tier_objects`, tests).
    var usage: (bytes: Int, count: Int) {
        state.withLockedValue { ($0.entries.totalCost, $0.entries.count) }
    }

    /// Bytes held outside the entries: copies being read in, evicted copies still held for a large send (tests). With
    /// ``usage``, at most ``maxBytes``.
    var bytesOutside: Int {
        state.withLockedValue { outside($0) }
    }

    /// How often `object` was asked for lately, as the tier counts (tests).
    func frequency(of object: CachedObject) -> Int {
        state.withLockedValue { $0.entries.frequency(object.key) }
    }

    /// Whether a current copy of `object` is held (tests).
    func holds(_ object: CachedObject) -> Bool {
        state.withLockedValue { state in
            guard let entry = state.entries.peekValue(forKey: object.key) else { return false }
            return entry.etag == object.etag && entry.size == object.size
        }
    }

    /// Bytes of large bodies sent since `object`'s copy last went from memory or was read in (nil: not held; tests).
    func bytesSentSinceWarm(_ object: CachedObject) -> Int? {
        let entry = state.withLockedValue { $0.entries.peekValue(forKey: object.key) }
        return entry.map { largeBytesSent.load(ordering: .relaxed) &- $0.lastSent.load(ordering: .relaxed) }
    }
}

/// Whether a connection holds one of the memory tier's large sends (``MemoryTier/bodyToSend(of:on:alone:headOnly:counted:)``):
/// one per connection (its HTTP/1 handler's), counted once however many large bodies it is sent before it asks
/// again. Atomic: responses are mostly written on the connection's event loop, but nothing here depends on it.
final class LargeSendHold: Sendable {
    private let held = Synchronization.Atomic<Bool>(false)
    /// The copy last sent from memory while held: alive until the hold is let go, it counts in the tier's bound even
    /// when evicted meanwhile (``MemoryObject/Alive``).
    private let sending = NIOLockedValueBox<MemoryObject?>(nil)
    /// The event loop the connection is served on, told when the hold is taken and let go (nil: tests, or a
    /// connection without one — then as if it carried only large sends; asked off its loop, as if it did not).
    private let loop: LoopYield?

    init(loop: LoopYield? = nil) {
        self.loop = loop
    }

    /// Whether every connection on this one's loop holds a large body (``LoopYield/carriesOnlyLargeSends``). Asked on
    /// the connection's loop.
    var loopCarriesOnlyLargeSends: Bool {
        guard let loop else { return true }
        return loop.eventLoop.inEventLoop && loop.carriesOnlyLargeSends
    }
    /// Marks it held; true if it was not (count it). Called on the connection's loop.
    func take() -> Bool {
        let taken = !held.load(ordering: .relaxed) && !held.exchange(true, ordering: .relaxed)
        if taken { loop?.largeHolderChanged(by: 1) }
        return taken
    }

    /// Marks it free; true if it was held (stop counting it). Called on the connection's loop.
    func release() -> Bool {
        let released = held.load(ordering: .relaxed) && held.exchange(false, ordering: .relaxed)
        if released {
            loop?.largeHolderChanged(by: -1)
            sending.withLockedValue { $0 = nil }
        }
        return released
    }

    /// Keeps `object` (being sent from memory) until the hold is let go.
    func keep(_ object: MemoryObject) {
        sending.withLockedValue { $0 = object }
    }
}

/// One object's bytes in the memory tier, and what they were read from.
final class MemoryObject: Sendable {
    let etag: String
    let size: Int64
    let file: FileIdentity
    /// The file's path relative to the store's `objects/` folder (nil: not in it; the whole path is checked).
    let relativePath: String?
    let body: ByteBuffer
    /// When ``file`` was last found to be what the object's path names (``NIODeadline/uptimeNanoseconds``).
    let checkedAt: Synchronization.Atomic<UInt64>
    /// What it counts against the tier's bound (body and overhead).
    let cost: Int
    /// Where it is counted from the moment it enters the tier until it is freed (``entered(counting:)``).
    private let counted = NIOLockedValueBox<Alive?>(nil)

    /// The bytes (costs) of the copies that entered the tier and are still alive, wherever they are held.
    final class Alive: Sendable {
        private let total = Synchronization.Atomic<Int>(0)
        var bytes: Int { total.load(ordering: .relaxed) }
        fileprivate func add(_ bytes: Int) { total.wrappingAdd(bytes, ordering: .relaxed) }
    }
    /// Where the tier's count of large bytes sent stood after this body last went from memory, or when it was read in
    /// (``MemoryTier/warmBytes``).
    let lastSent = Synchronization.Atomic<Int>(0)

    private init(
        etag: String, size: Int64, file: FileIdentity, relativePath: String?, body: ByteBuffer, checkedAt: NIODeadline, cost: Int
    ) {
        self.checkedAt = Synchronization.Atomic(checkedAt.uptimeNanoseconds)
        self.cost = cost
        self.etag = etag
        self.size = size
        self.file = file
        self.relativePath = relativePath
        self.body = body
    }

    /// It entered the tier: counted in `alive` until freed.
    func entered(counting alive: Alive) {
        counted.withLockedValue { $0 = alive }
        alive.add(cost)
    }

    deinit {
        counted.withLockedValue { $0 }?.add(-cost)
    }

    /// Reads `object`'s file whole (blocking: the thread pool's work). Nil when it cannot be read or is not of the
    /// object's size.
    static func read(_ object: CachedObject, relativePath: String?, at time: NIODeadline, cost: Int) -> MemoryObject? {
        let descriptor = open(object.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        guard let file = FileIdentity(descriptor: descriptor), file.size == object.size else { return nil }
        let size = Int(object.size)
        var buffer = ByteBufferAllocator().buffer(capacity: size)
        var done = 0
        let complete = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { bytes -> Int in
            while done < size {
                let count = pread(descriptor, bytes.baseAddress! + done, size - done, off_t(done))
                if count > 0 {
                    done += count
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            return done
        }
        guard complete == size else { return nil }
        return MemoryObject(
            etag: object.etag, size: object.size, file: file, relativePath: relativePath, body: buffer, checkedAt: time, cost: cost)
    }
}

/// Which file a path names, as far as a cheap `stat` can tell: device, inode, size and modification time. A file
/// renamed over the path (a new version) has another inode; one truncated or written in place another size or time.
struct FileIdentity: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modifiedSeconds: Int64
    let modifiedNanoseconds: Int64

    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        self.init(info)
    }

    init?(relativePath: String, in directory: Int32) {
        var info = stat()
        guard fstatat(directory, relativePath, &info, 0) == 0 else { return nil }
        self.init(info)
    }

    init?(descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        self.init(info)
    }

    private init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modifiedSeconds = Int64(info.st_mtim.tv_sec)
        modifiedNanoseconds = Int64(info.st_mtim.tv_nsec)
    }
}
