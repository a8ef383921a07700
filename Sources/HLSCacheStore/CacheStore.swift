import Dispatch
import Foundation
import GRDB
import HLSCacheCore
import HLSCrypto
import Synchronization

/// The on-disk cache (docs/design.md §6): `objects/ab/cdef…` files named by the SHA-256 of the cache key, written
/// through `tmp/`, indexed in `index.sqlite`.
///
/// Safe to share between threads, and between two processes on one directory (`hlscache serve` and
/// `hlscache fetch`): every change to the index is a SQLite transaction and the index is the truth. Each
/// instance keeps an in-memory map of complete objects so ``lookup(_:)`` — called on event loops for every
/// request — normally takes one lock and no I/O; a miss in memory falls back to one SQLite read, because the
/// other process may have stored the object.
///
/// See `docs/store.md` for the write protocol, recovery and eviction.
package final class CacheStore: Sendable {
    /// The cache directory.
    package let directory: String
    /// The size cap: total bytes of objects above which least-recently-used objects are evicted.
    package let maxBytes: Int64
    /// Free space to leave on the file system; writes that would eat into it evict first or fail.
    package let freeDiskCushion: Int64
    /// What startup recovery did.
    package let recovery: CacheRecoveryReport

    /// The default free-disk cushion: 100 MiB.
    package static let defaultFreeDiskCushion: Int64 = 100 * 1024 * 1024

    let objectsDirectory: String
    let tmpDirectory: String
    let index: IndexDatabase
    let state: Mutex<State>
    /// Moves (under the state lock) with every change of the in-memory map other than an access time: an object
    /// stored, replaced, removed, evicted, or its expiry or flags changed. ``currentCheck(_:and:)`` reports it, so
    /// that a caller which found objects current can tell later, by one comparison, that nothing changed since.
    let mapGeneration = Atomic<UInt64>(0)
    let lockFileDescriptor: Int32
    /// This open's file in `sessions/`, removed by ``close()``.
    let sessionPath: String
    let flushQueue = DispatchQueue(label: "hlscache.store.access-times")

    /// Access times are written in batches: when this many distinct objects are pending, or this long after the
    /// first one (and by eviction and close). One row is written per object however often it was hit in between: a
    /// library walked through (each object hit every second or two) wrote a row per hit with 256 and 2 s.
    static let accessFlushBatch = 4096
    static let accessFlushDelay: TimeInterval = 10

    struct State: Sendable {
        /// Complete objects by key hash, as this process last saw them.
        var entries = KeyHashTable<ObjectRow>()
        /// Pin counts by key hash; pinned objects are never evicted by this process.
        var pins = KeyHashTable<Int>()
        /// Access times not yet written to the index.
        var pendingAccess = KeyHashTable<Double>()
        var flushScheduled = false
        /// Bytes announced by open writers of this process, counted against the cap before they finish.
        var reservedBytes: Int64 = 0
        var tempCounter = 0
        /// Evictions under way (deleting rows, then unlinking their files).
        var unlinking = 0
        /// SHA-256 of recently looked-up keys: hashing is most of a hit's lookup cost, and players ask for the
        /// same keys over and over. Bounded, least recently used out: the keys of the streams being played stay.
        var recentHashes = BoundedLRU<String, String>(maxCount: CacheStore.maxRememberedKeyHashes)
        /// What is set once or rarely (closing, observers, a test's hook), read rarely: under the same lock, which
        /// these few reads do not hold for long.
        var lifecycle = Lifecycle()
    }

    /// What is set once or rarely (closing, observers, a test's hook).
    struct Lifecycle: Sendable {
        /// Set by ``close()``; the readiness check reports a closed store.
        var closed = false
        /// Told the keys of the objects each eviction removed (``onEviction(_:)``).
        var evictionObservers: [@Sendable ([CacheKey]) -> Void] = []
        /// Called by each eviction between deleting its rows and unlinking their files (tests: a barrier that holds
        /// an eviction there, to close the store in that window every run).
        var beforeUnlinkHook: (@Sendable () -> Void)?
    }

    /// Opens (creating if needed) the cache in `directory` and runs startup recovery.
    ///
    /// - Parameters:
    ///   - maxBytes: the size cap for all objects.
    ///   - freeDiskCushion: bytes to keep free on the file system (default 100 MiB).
    /// - Throws: ``CacheStoreError/io`` or ``CacheStoreError/corrupted`` when the directory or index is unusable.
    package static func open(
        directory: String,
        maxBytes: Int64,
        freeDiskCushion: Int64 = CacheStore.defaultFreeDiskCushion
    ) throws -> CacheStore {
        try CacheStore(directory: directory, maxBytes: maxBytes, freeDiskCushion: freeDiskCushion)
    }

    private init(directory: String, maxBytes: Int64, freeDiskCushion: Int64) throws {
        precondition(maxBytes > 0, "maxBytes must be positive")
        let directory = directory.count > 1 && directory.hasSuffix("/") ? String(directory.dropLast()) : directory
        self.directory = directory
        self.maxBytes = maxBytes
        self.freeDiskCushion = max(0, freeDiskCushion)
        objectsDirectory = directory + "/objects"
        tmpDirectory = directory + "/tmp"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw CacheStoreError.io.with("cannot create \(directory): \(error)")
        }
        try FileSystem.makeDirectory(objectsDirectory)
        try FileSystem.makeDirectory(tmpDirectory)

        // Every open store holds a shared flock on `lock`; whoever gets it exclusively is alone and may
        // delete temp and orphan files that would otherwise belong to the other process's writes in flight.
        let lockFD = try FileSystem.openLockFile(directory + "/lock")
        let exclusive = FileSystem.lock(lockFD, exclusive: true, wait: false)
        do {
            // Each open store leaves a file in `sessions/` until ``close()``. Alone, a leftover one means a process
            // ended without closing (killed, crashed, power cut): only then does the full recovery pass run.
            let sessions = directory + "/sessions"
            let hadSessions = FileSystem.isDirectory(sessions)
            try FileSystem.makeDirectory(sessions)
            let leftover = exclusive ? FileSystem.contents(of: sessions) : []
            // A new index over old files (the index was deleted to start over) must not keep them unaccounted.
            let hadIndex = FileSystem.fileSize(directory + "/index.sqlite") != nil
            index = try IndexDatabase(path: directory + "/index.sqlite")
            recovery = try Self.recover(
                index: index, objectsDirectory: objectsDirectory, tmpDirectory: tmpDirectory, exclusive: exclusive,
                full: exclusive && (!hadSessions || !leftover.isEmpty || !hadIndex))
            for name in leftover { FileSystem.remove(sessions + "/" + name) }
            // Durable before this process writes anything: a power cut from here on leaves it behind.
            sessionPath = sessions + "/\(getpid())-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
            FileSystem.closeFile(try FileSystem.createExclusive(sessionPath))
            try FileSystem.syncPath(sessionPath)
            try FileSystem.syncPath(sessions)
            state = Mutex(State())
        } catch {
            FileSystem.closeFile(lockFD)
            throw error
        }
        // Downgrade (or, when another process was first, wait for its recovery to finish) to shared.
        _ = FileSystem.lock(lockFD, exclusive: false, wait: true)
        lockFileDescriptor = lockFD
    }

    deinit {
        FileSystem.closeFile(lockFileDescriptor)
    }

    /// Calls `observer` after every eviction of this instance (size cap, free-disk cushion, expired objects) with the
    /// keys of the objects it removed, once their rows are gone, on the evicting thread — which may be a write's:
    /// hand slow work off. Not called for ``remove(_:)``, whose callers know what they removed.
    package func onEviction(_ observer: @escaping @Sendable ([CacheKey]) -> Void) {
        state.withLock { $0.lifecycle.evictionObservers.append(observer) }
    }

    /// Sets the hook ``Lifecycle/beforeUnlinkHook`` runs (nil: none).
    package func beforeUnlinking(_ hook: (@Sendable () -> Void)?) {
        state.withLock { $0.lifecycle.beforeUnlinkHook = hook }
    }

    /// Writes pending access times, records the clean close (the next open skips the full recovery pass) and stops
    /// using the directory's lock. Open writers can still finish. Idempotent.
    package func close() {
        let wasClosed = state.withLock { state in
            defer { state.lifecycle.closed = true }
            return state.lifecycle.closed
        }
        guard !wasClosed else { return }
        flushAccessTimes()
        // An eviction still unlinking its files (rows already gone) would leave files without rows if the process
        // ends now; the session file stays, so the next open alone runs the full pass that removes them.
        if state.withLock({ $0.unlinking == 0 }) { FileSystem.remove(sessionPath) }
        // The descriptor closes in deinit; unlock now so a restarted server (or a test) can reopen the
        // directory exclusively while this object is still referenced.
        FileSystem.unlock(lockFileDescriptor)
    }

    /// The object file path for a key hash: `objects/ab/cdef…`.
    func objectPath(forHash hash: String) -> String {
        "\(objectsDirectory)/\(hash.prefix(2))/\(hash.dropFirst(2))"
    }

    static func keyHash(_ key: CacheKey) -> String {
        SHA256.hex(key.value)
    }

    /// How many key hashes ``State/recentHashes`` remembers.
    static let maxRememberedKeyHashes = 16_384

    /// Runs `body` under the state lock with `key`'s hash: remembered (one lock), or computed outside the lock and
    /// remembered.
    private func withKeyHash<T: Sendable>(_ key: CacheKey, _ body: (inout State, String) -> T) -> (hash: String, result: T) {
        let remembered = state.withLock { state -> (hash: String, result: T)? in
            guard let hash = state.recentHashes.value(forKey: key.value) else { return nil }
            return (hash, body(&state, hash))
        }
        if let remembered { return remembered }
        let computed = Self.keyHash(key)
        return state.withLock { state in
            _ = state.recentHashes.setValue(computed, forKey: key.value)
            return (computed, body(&state, computed))
        }
    }

    /// `key`'s hash, as a lookup finds it (tests).
    func cachedKeyHash(_ key: CacheKey) -> String {
        withKeyHash(key) { _, _ in () }.hash
    }

    /// Key hashes remembered, and whether `key`'s is (tests; the recency order is left as it is).
    var rememberedKeyHashes: Int { state.withLock { $0.recentHashes.count } }
    func remembersKeyHash(of key: CacheKey) -> Bool { state.withLock { $0.recentHashes.contains(key.value) } }

    // MARK: - Lookup

    private enum MemoryLookup {
        case hit(ObjectRow, flushNow: Bool, scheduleFlush: Bool)
        case expired
        case miss
    }

    /// The complete, unexpired object stored under `key`, or `nil`.
    ///
    /// Records the access (for LRU) in memory; access times reach the index in batches. A lookup that races
    /// an eviction by the other process can return a path that vanishes before it is opened: callers treat
    /// `ENOENT` on open as a miss.
    package func lookup(_ key: CacheKey) -> CachedObject? {
        lookup(key, pin: false)?.object
    }

    /// Like ``lookup(_:)``, and pins the object in the same step so this process cannot evict it between
    /// the lookup and the caller opening the file.
    package func lookupAndPin(_ key: CacheKey) -> (object: CachedObject, pin: CachePin)? {
        guard let (object, pin) = lookup(key, pin: true), let pin else { return nil }
        return (object, pin)
    }

    /// The in-memory step of a lookup, in place: one hash of the key, no copy of the row written back.
    private static func lookUp(_ state: inout State, hash: String, now: Double, pin: Bool) -> MemoryLookup {
        guard let index = state.entries.index(forKey: hash) else { return .miss }
        guard !state.entries.values[index].isExpired(at: now) else { return .expired }
        state.entries.values[index].lastAccess = now
        if pin { state.pins[hash, default: 0] += 1 }
        let (flushNow, schedule) = recordAccess(&state, hash: hash, at: now)
        return .hit(state.entries.values[index], flushNow: flushNow, scheduleFlush: schedule)
    }

    private func lookup(_ key: CacheKey, pin: Bool) -> (object: CachedObject, pin: CachePin?)? {
        let now = Date().timeIntervalSince1970
        let (hash, found) = withKeyHash(key) { state, hash in Self.lookUp(&state, hash: hash, now: now, pin: pin) }
        switch found {
        case .hit(let row, let flushNow, let schedule):
            scheduleAccessFlush(now: flushNow, later: schedule)
            return (row.object(path: objectPath(forHash: hash)), pin ? CachePin(store: self, keyHash: hash) : nil)
        case .expired:
            return nil
        case .miss:
            return lookupInIndex(hash: hash, now: now, pin: pin)
        }
    }

    /// Pins `object` again if it is still what is stored under its key (same entity tag and size, not expired),
    /// recording the access like a lookup. For callers that keep a ``CachedObject`` from an earlier lookup (the
    /// proxy's replayed hits): no key hashing, no new ``CachedObject``. `nil` when the object changed or went
    /// away from this process's map: look it up again.
    package func pinIfUnchanged(_ object: CachedObject) -> CachePin? {
        let hash = object.keyHash
        let now = Date().timeIntervalSince1970
        let flush = state.withLock { state -> (Bool, Bool)? in
            guard let index = state.entries.index(forKey: hash) else { return nil }
            // In place, as ``currentCheck(_:and:)`` does: a copy of the row retained and released each of its strings.
            guard Self.touch(&state.entries.values[index], ifItIs: object, at: now) else { return nil }
            state.pins[hash, default: 0] += 1
            return Self.recordAccess(&state, hash: hash, at: now)
        }
        guard let (flushNow, schedule) = flush else { return nil }
        scheduleAccessFlush(now: flushNow, later: schedule)
        return CachePin(store: self, keyHash: hash)
    }

    /// Drops `object` from this process's map if it is still what the map holds for its key (same entity tag and
    /// size): its file was found not to match it (another process replaced or damaged it), so the next lookup reads
    /// the index again and checks the file's size against the row before using it.
    package func forget(_ object: CachedObject) {
        state.withLock { state in
            guard let row = state.entries[object.keyHash], row.etag == object.etag, row.size == object.size else { return }
            state.entries[object.keyHash] = nil
            mapChanged()
        }
    }

    /// The slow path: another process may have stored the object since this one loaded its map.
    private func lookupInIndex(hash: String, now: Double, pin: Bool) -> (object: CachedObject, pin: CachePin?)? {
        guard let stored = try? index.read({ db in try IndexDatabase.fetch(db, keyHash: hash) }),
            !stored.isExpired(at: now)
        else { return nil }
        let path = objectPath(forHash: hash)
        guard FileSystem.fileSize(path) == stored.size else { return nil }
        var row = stored
        row.lastAccess = now
        let (flushNow, schedule) = state.withLock { state in
            state.entries[hash] = row
            mapChanged()
            if pin { state.pins[hash, default: 0] += 1 }
            return Self.recordAccess(&state, hash: hash, at: now)
        }
        scheduleAccessFlush(now: flushNow, later: schedule)
        return (row.object(path: path), pin ? CachePin(store: self, keyHash: hash) : nil)
    }

    // MARK: - Access times

    static func recordAccess(_ state: inout State, hash: String, at now: Double) -> (Bool, Bool) {
        state.pendingAccess[hash] = now
        if state.pendingAccess.count >= accessFlushBatch && !state.flushScheduled {
            state.flushScheduled = true
            return (true, false)
        }
        if !state.flushScheduled {
            state.flushScheduled = true
            return (false, true)
        }
        return (false, false)
    }

    func scheduleAccessFlush(now: Bool, later: Bool) {
        if now {
            flushQueue.async { [weak self] in self?.flushAccessTimes() }
        } else if later {
            flushQueue.asyncAfter(deadline: .now() + Self.accessFlushDelay) { [weak self] in
                self?.flushAccessTimes()
            }
        }
    }

    /// Writes the access times recorded by lookups to the index in one transaction.
    ///
    /// Runs by itself in the background (after ``accessFlushBatch`` hits or a couple of seconds); call it
    /// before reading LRU order from another process.
    package func flushAccessTimes() {
        let pending = state.withLock { state in
            defer {
                state.pendingAccess.removeAll(keepingCapacity: true)
                state.flushScheduled = false
            }
            return state.pendingAccess
        }
        guard !pending.isEmpty else { return }
        do {
            try index.write { db in
                // One prepared statement for the batch: compiling the UPDATE per row was most of a flush's cost
                // (a walk over a library records one access per distinct object).
                let update = try db.cachedStatement(
                    sql: "UPDATE objects SET last_access = ? WHERE key_hash = ? AND last_access < ?")
                for (hash, time) in pending {
                    try update.execute(arguments: [time, hash, time])
                }
            }
        } catch {
            // Losing access times only makes LRU less precise; the next flush carries newer ones.
        }
    }

    // MARK: - Pins, locks, removal, usage

    /// Pins whatever is, or will be, stored under `key`: this process never evicts a pinned object.
    ///
    /// Keep the pin while a file is served; it is released by ``CachePin/unpin()`` or when it is deinitialised.
    package func pin(_ key: CacheKey) -> CachePin {
        let hash = Self.keyHash(key)
        state.withLock { $0.pins[hash, default: 0] += 1 }
        return CachePin(store: self, keyHash: hash)
    }

    func unpin(keyHash: String) {
        state.withLock { state in
            // One lookup of the key: this runs once per hit.
            guard let index = state.pins.index(forKey: keyHash) else { return }
            if state.pins.values[index] <= 1 { state.pins.remove(at: index) } else { state.pins.values[index] -= 1 }
        }
    }

    /// Whether this process holds a pin on `key`.
    package func isPinned(_ key: CacheKey) -> Bool {
        let hash = Self.keyHash(key)
        return state.withLock { $0.pins[hash] != nil }
    }

    /// Removes the object stored under `key`, if any; readers that already opened the file keep reading it.
    /// - Returns: whether an object was removed.
    @discardableResult
    package func remove(_ key: CacheKey) throws -> Bool {
        let hash = Self.keyHash(key)
        state.withLock { state in
            state.entries[hash] = nil
            state.pendingAccess[hash] = nil
            mapChanged()
        }
        let deleted = try index.write { db -> Bool in
            try db.execute(sql: "DELETE FROM objects WHERE key_hash = ?", arguments: [hash])
            return db.changesCount > 0
        }
        FileSystem.remove(objectPath(forHash: hash))
        return deleted
    }

    /// Sets the `locked` flag of the objects stored under `keys`; locked objects are never evicted.
    ///
    /// Keys with no object yet are ignored: pass `locked: true` to ``CacheWriter/finish(contentType:kind:etag:lastModified:expiresAt:locked:location:tokens:slice:)``
    /// for objects an item downloads later.
    package func setLocked(_ keys: [CacheKey], _ locked: Bool) throws {
        let hashes = keys.map(Self.keyHash)
        try index.write { db in
            for hash in hashes {
                try db.execute(sql: "UPDATE objects SET locked = ? WHERE key_hash = ?", arguments: [locked, hash])
            }
        }
        state.withLock { state in
            for hash in hashes { state.entries[hash]?.locked = locked }
            mapChanged()
        }
    }

    /// Keeps the objects `keys` without an expiry: a live segment a viewer stored (kept for the live window) that a
    /// recording lists from now on. Keys with no object are ignored.
    package func clearExpiry(_ keys: [CacheKey]) throws {
        let hashes = keys.map(Self.keyHash)
        try index.write { db in
            for hash in hashes {
                try db.execute(sql: "UPDATE objects SET expires_at = NULL WHERE key_hash = ? AND expires_at IS NOT NULL", arguments: [hash])
            }
        }
        state.withLock { state in
            for hash in hashes { state.entries[hash]?.expiresAt = nil }
            mapChanged()
        }
    }

    /// Total bytes and number of complete objects, from the index (so it includes the other process's).
    package func usage() throws -> (bytes: Int64, count: Int) {
        try index.read(IndexDatabase.usage)
    }

    /// Bytes held by locked objects: eviction cannot free them.
    package func lockedBytes() throws -> Int64 {
        try index.read(IndexDatabase.lockedBytes)
    }
}
