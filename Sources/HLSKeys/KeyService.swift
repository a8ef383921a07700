import Foundation
import HLSCacheCore
import HLSCrypto
import HLSOrigin
import Logging
import NIOConcurrencyHelpers

/// The keys of protected streams, every method in the identity key format (docs/design.md §7): registers the key
/// URIs found in playlists, fetches keys from their origins, keeps them sealed with AES-256-GCM under the
/// ``MasterKey`` in their own SQLite file, gives them out while valid, and renews them.
///
/// The plaintext of a key exists only in memory, on its way from the origin to the client; logs and errors
/// carry ids and hosts, never bytes. Concurrent requests for one key share one origin fetch.
package final class KeyService: Sendable {
    /// The lengths of a key: 16 bytes (AES-128, SAMPLE-AES, SAMPLE-AES-CTR), 32 (AES-256, AES-256-CTR). Any other
    /// answer of a key's origin is refused.
    package static let keySizes: Set<Int> = [16, 32]

    /// The length of a key of `method` (as a playlist writes it): 16 bytes for `AES-128`, `SAMPLE-AES` and
    /// `SAMPLE-AES-CTR`, 32 for `AES-256` and `AES-256-CTR`; `nil` for a method this does not know (then any of
    /// ``keySizes`` is taken).
    package static func keySize(method: String) -> Int? {
        switch method.uppercased() {
        case "AES-128", "SAMPLE-AES", "SAMPLE-AES-CTR": 16
        case "AES-256", "AES-256-CTR": 32
        default: nil
        }
    }

    /// What a key of `method` must measure, in words for errors.
    static func expectedSize(method: String?) -> String {
        if let method, let size = keySize(method: method) { return "\(method) keys have \(size) bytes" }
        return "a key has 16 bytes (AES-128, SAMPLE-AES, SAMPLE-AES-CTR) or 32 (AES-256, AES-256-CTR)"
    }

    /// Whether `count` bytes can be a key of `method` (any of ``keySizes`` when the method is not known).
    static func fits(_ count: Int, method: String?) -> Bool {
        if let method, let size = keySize(method: method) { return count == size }
        return keySizes.contains(count)
    }
    /// The settings this service runs with.
    package let configuration: KeyConfiguration
    private let database: KeyDatabase
    /// The master key the keys are sealed under; other secrets the proxy keeps at rest (channel headers) use it too.
    package let masterKey: MasterKey
    private let fetcher: any KeyFetcher
    private let logger: Logger
    private let clock: @Sendable () -> Date
    private struct Registration {
        var id: KeyID
        var url: String
        var method: String?
    }

    /// What the service keeps in memory, under one lock (each field's accessor below takes it for one short step).
    private struct State {
        /// Keys registered in this process, by cache key: their id, URL and method, so that rewriting a playlist
        /// again writes nothing and the proxy's check of every request it serves does not hash the URL. Bounded: the
        /// keys named least recently go beyond ``KeyConfiguration/registeredKeysLimit`` (a live channel rotating its
        /// key every few seconds names thousands a day); named again by a playlist, they are registered again (one
        /// database write).
        var registered: BoundedLRU<String, Registration>
        /// Keys live playlists name, with how long a copy of each may be served after its fetch
        /// (``limitToLive(_:seconds:)``); the keys named least recently go beyond 10,000 (named again, they are
        /// capped again: one database write).
        var liveLifetimes = BoundedLRU<KeyID, Double>(maxCount: 10_000)
        /// One origin fetch per id at a time (``fetchShared(_:via:)``).
        var inFlight: [KeyID: Task<[UInt8], any Error>] = [:]
        /// Ids already reported as unreadable, so the log says it once.
        var reportedUnreadable: Set<KeyID> = []
        var counters = KeyStatistics()
        /// Who may receive keys (replaced by a reload).
        var access: KeyAccessPolicy
    }
    private let state: NIOLockedValueBox<State>

    private func withRegistered<T>(_ body: (inout BoundedLRU<String, Registration>) throws -> T) rethrows -> T {
        try state.withLockedValue { try body(&$0.registered) }
    }
    private func withLiveLifetimes<T>(_ body: (inout BoundedLRU<KeyID, Double>) throws -> T) rethrows -> T {
        try state.withLockedValue { try body(&$0.liveLifetimes) }
    }
    private func withInFlight<T>(_ body: (inout [KeyID: Task<[UInt8], any Error>]) throws -> T) rethrows -> T {
        try state.withLockedValue { try body(&$0.inFlight) }
    }
    private func withReportedUnreadable<T>(_ body: (inout Set<KeyID>) throws -> T) rethrows -> T {
        try state.withLockedValue { try body(&$0.reportedUnreadable) }
    }
    private func withCounters<T>(_ body: (inout KeyStatistics) throws -> T) rethrows -> T {
        try state.withLockedValue { try body(&$0.counters) }
    }

    /// Who may receive keys: ``KeyConfiguration/access`` until ``setAccess(_:)`` replaces it (a reload).
    package var access: KeyAccessPolicy { state.withLockedValue { $0.access } }

    /// Replaces who may receive keys; the next key request is judged by it (docs/operations.md#reload).
    package func setAccess(_ policy: KeyAccessPolicy) {
        state.withLockedValue { $0.access = policy }
    }

    /// What this service did since it started (origin fetches, expiries), for `/metrics`.
    package var statistics: KeyStatistics { state.withLockedValue { $0.counters } }

    /// Opens (creating if needed) `directory/keys.sqlite`.
    /// - Parameters:
    ///   - masterKey: usually ``MasterKey/load(directory:environment:)``.
    ///   - fetcher: the origin client.
    ///   - now: the clock; tests move it.
    /// - Throws: ``KeyError/storage`` when the database cannot be opened.
    package init(
        directory: String, configuration: KeyConfiguration, masterKey: MasterKey, fetcher: any KeyFetcher, logger: Logger,
        now: @escaping @Sendable () -> Date = Date.init
    ) throws(KeyError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw KeyError.storage.with("cannot create \(directory): \(error)")
        }
        self.database = try KeyDatabase(path: directory + "/" + KeyDatabase.fileName)
        self.configuration = configuration
        self.state = NIOLockedValueBox(
            State(registered: BoundedLRU(maxCount: max(1, configuration.registeredKeysLimit)), access: configuration.access))
        self.masterKey = masterKey
        self.fetcher = fetcher
        self.logger = logger
        self.clock = now
    }

    /// The id of `url` if a served playlist registered it as a key in this process, else nil.
    /// The proxy uses it to keep key files off the generic (cached, plaintext) path.
    package func registeredID(for url: OriginURL) -> KeyID? {
        registeredID(for: CacheKey(url, volatileParameters: configuration.volatileQueryParameters))
    }

    /// Like ``registeredID(for:)-(OriginURL)`` for a cache key made with this service's volatile parameters: one
    /// dictionary lookup, no hashing (the proxy asks for every request it serves).
    package func registeredID(for key: CacheKey) -> KeyID? {
        withRegistered { $0.value(forKey: key.value)?.id }
    }

    /// The id of the key at `url`, without registering it.
    package func id(for url: OriginURL) -> KeyID {
        KeyID(CacheKey(url, volatileParameters: configuration.volatileQueryParameters))
    }

    /// Registers the key at `url` (a playlist names it) and returns its id, the `/keys/{keyid}` it is served at.
    ///
    /// Writes only when the key is new to this process or its URL changed (a fresh signing token, which later
    /// fetches use).
    /// - Parameters:
    ///   - itemExpiry: the limit the items holding the key put on it (`hlscache fetch --expires`): the latest
    ///     of their expiries, as one item's expiry must not cut another's playback short; the key is never
    ///     served past it. `.unchanged` (a playlist the proxy serves) keeps the one recorded.
    ///   - headers: the item's request headers (`hlscache fetch --header`, e.g. a cookie the key server wants),
    ///     sealed under the master key and sent with every later fetch of this key, renewals included, on top of
    ///     the origin's configured headers. Empty keeps the headers already recorded.
    ///   - method: the key tag's `METHOD` as written, which says the key's length (``keySize(method:)``): an origin
    ///     answering another length is refused, and nothing is stored. `nil` or empty keeps the one recorded.
    /// - Throws: ``KeyError/storage``.
    @discardableResult
    package func register(
        _ url: OriginURL, itemExpiry: ItemExpiry = .unchanged, headers: [(String, String)] = [], method: String? = nil
    ) throws(KeyError) -> KeyID {
        let key = CacheKey(url, volatileParameters: configuration.volatileQueryParameters)
        let id = KeyID(key)
        let method = method.flatMap { $0.isEmpty ? nil : $0 }
        let known = withRegistered { registry in
            registry.value(forKey: key.value).map { $0.url == url.string && (method == nil || $0.method == method) } ?? false
        }
        if known && itemExpiry == .unchanged && headers.isEmpty { return id }
        var sealedHeaders: [UInt8]?
        if !headers.isEmpty {
            do {
                let plain = try JSONEncoder().encode(headers.map { [$0.0, $0.1] })
                sealedHeaders = try AES256GCM.seal(Array(plain), key: masterKey.bytes, aad: KeyService.headersAAD(id))
            } catch {
                throw KeyError.storage.with("cannot seal the headers of key \(id): \(error)")
            }
        }
        try database.register(
            id: id, url: url.string, host: url.host, itemExpiry: itemExpiry, sealedHeaders: sealedHeaders, method: method, now: clock())
        withRegistered { registry in
            let method = method ?? registry.peekValue(forKey: key.value)?.method
            _ = registry.setValue(Registration(id: id, url: url.string, method: method), forKey: key.value)
        }
        return id
    }

    /// Serves the stored copy of a key a live playlist names for at most `seconds` after it was fetched: an encoder
    /// restarted with a new key at the same URI (ffmpeg's `-hls_key_info_file`) is then not answered with the
    /// previous run's key for the whole TTL. Past that the next request refetches it, as for any expired key.
    /// - Throws: ``KeyError/storage``.
    ///
    /// A live playlist names its keys on every reload: the stored copy is capped (one database write) only when the
    /// lifetime is new for the key in this process; copies fetched later get it at fetch time.
    package func limitToLive(_ id: KeyID, seconds: Double) throws(KeyError) {
        let seconds = max(1, seconds)
        let changed = withLiveLifetimes { table in
            let previous = table.value(forKey: id)
            _ = table.setValue(seconds, forKey: id)
            return previous != seconds
        }
        if changed { try database.cap(id, secondsAfterFetch: seconds) }
    }

    /// Drops the stored copy of a key and the headers its item gave (the item was deleted or expired): the key is
    /// `pending` again and is fetched from the origin if a player asks for it.
    /// - Throws: ``KeyError/storage``.
    package func forget(_ id: KeyID) throws(KeyError) {
        try database.forget(id)
        logger.debug("key \(id) forgotten")
    }

    /// Stops trusting `key` as the bytes of key `id`: a segment it should decrypt did not (invalid PKCS#7 padding,
    /// ``SegmentVerification``). If the stored copy is still those bytes it is dropped, so the next use — the
    /// downloader's recheck, a `resume`, the proxy's `/keys/{id}` — fetches the key from the origin again instead
    /// of serving it until its TTL runs out. A copy fetched meanwhile with other bytes is kept.
    ///
    /// The check cannot tell a wrong key from a damaged segment; dropping a good key costs one refetch, keeping a
    /// wrong one (an origin that answered 200 with the wrong 16 bytes) broke every later attempt until
    /// `hlscache keys renew`.
    /// - Returns: whether the stored copy was dropped.
    /// - Throws: ``KeyError/storage``.
    @discardableResult
    package func distrust(_ id: KeyID, key: [UInt8], reason: String) throws(KeyError) -> Bool {
        guard let record = try database.record(id), let sealed = record.sealed, open(record) == key else { return false }
        let dropped = try database.drop(id, ifSealed: sealed, reason: reason)
        if dropped { logger.warning("key \(id) (\(record.host)) dropped: \(reason); it is fetched again on its next use") }
        return dropped
    }

    /// Drops the sealed bytes of every key past its expiry: an expired copy is never served, so it is not kept.
    /// The key still reads `expired` (and is refetched on the next request while the origin answers).
    /// - Returns: how many keys were purged.
    /// - Throws: ``KeyError/storage``.
    @discardableResult
    package func purgeExpired() throws(KeyError) -> Int {
        let count = try database.purgeExpired(now: clock())
        if count > 0 { logger.info("purged \(count) expired key(s) from the key store") }
        return count
    }

    /// The key's bytes (16 or 32, as its method says): the stored copy while it is valid, otherwise fetched from the origin (and stored).
    ///
    /// - Throws: ``KeyError/notFound`` for an id never registered; ``KeyError/expired`` (403) when the stored
    ///   copy is past its expiry and the origin does not renew it; ``KeyError/keyUnavailable`` when the origin
    ///   fails or answers another length than the key's method has (502), or (403) when the stored copy cannot be
    ///   decrypted — another master key — and the origin does not answer. Never returns wrong bytes.
    /// - Parameter via: where to fetch the key from when it must be fetched, instead of its origin URL: an
    ///   item downloaded through a fleet's balancer (`through`) asks the balancer for `/keys/{id}/…`, so the node
    ///   that serves the key stores it too.
    package func key(_ id: KeyID, via: OriginURL? = nil) async throws(KeyError) -> [UInt8] {
        guard let record = try database.record(id) else {
            throw KeyError.notFound.with("no key \(id) is registered; reload the playlist")
        }
        let state = record.state(masterKeyID: masterKey.id, now: clock())
        // Counted whether or not the once-a-second purge has already dropped the expired copy's bytes: the
        // record keeps its expiry, so a key fetched once and now past it still reads `expired`.
        if state == .expired { withCounters { $0.expiries += 1 } }
        var unreadable = false
        if record.isStored {
            if let plain = open(record) {
                if state == .valid { return plain }
            } else {
                unreadable = true
            }
        }
        do throws(KeyError) {
            return try await fetchShared(record, via: via)
        } catch {
            if unreadable {
                throw KeyError.keyUnavailable.withStatus(403).with(
                    "the stored copy of \(id) cannot be decrypted with this master key and the origin did not provide it (\(error.message))"
                )
            }
            if record.isStored || record.state(masterKeyID: masterKey.id, now: clock()) == .expired {
                let when = record.expiresAt.map { " at \(ISO8601DateFormatter().string(from: $0))" } ?? ""
                throw KeyError.expired.with("key \(id) expired\(when) and was not renewed (\(error.message))")
            }
            throw error
        }
    }

    /// The stored copy while it is valid, without the network and without Swift concurrency (one SQLite read),
    /// so the server can answer the common case — a key already fetched — from its thread pool.
    /// - Returns: `nil` when the key must be fetched (pending, expired, unreadable).
    /// - Throws: ``KeyError/notFound`` for an id never registered, ``KeyError/storage``.
    package func storedKey(_ id: KeyID) throws(KeyError) -> [UInt8]? {
        guard let record = try database.record(id) else {
            throw KeyError.notFound.with("no key \(id) is registered; reload the playlist")
        }
        guard record.state(masterKeyID: masterKey.id, now: clock()) == .valid else { return nil }
        return open(record)
    }

    /// Fetches the key again now, whatever its state (`hlscache keys renew`).
    /// - Returns: the record after the renewal.
    /// - Throws: ``KeyError/notFound``, ``KeyError/keyUnavailable``, ``KeyError/storage``.
    @discardableResult
    package func renew(_ id: KeyID) async throws(KeyError) -> KeyRecord {
        guard let record = try database.record(id) else { throw KeyError.notFound.with("no key \(id) is registered") }
        _ = try await fetchShared(record)
        guard let renewed = try database.record(id) else { throw KeyError.notFound.with("key \(id) was removed meanwhile") }
        return renewed
    }

    /// Renews every stored key that expires within `window` (or has expired, or is unreadable) and that a
    /// refetch can extend: not when the item's own expiry is what limits it. Failures are logged and counted.
    package func renewDue(within window: Duration) async -> (renewed: Int, failed: Int) {
        let records: [KeyRecord]
        do {
            records = try database.all()
        } catch {
            logger.warning("key renewal: \(error)")
            return (0, 0)
        }
        let now = clock()
        let horizon = now.addingTimeInterval(window.seconds)
        var renewed = 0
        var failed = 0
        // Purged expired copies (fetched once, bytes dropped) are renewed like stored ones.
        for record in records where record.isStored || record.fetchedAt != nil {
            if let item = record.itemExpiresAt, item <= horizon, record.fetchedExpiresAt.map({ item <= $0 }) ?? true { continue }
            let state = record.state(masterKeyID: masterKey.id, now: now)
            guard state == .unreadable || (record.expiresAt.map { $0 <= horizon } ?? false) else { continue }
            do throws(KeyError) {
                _ = try await fetchShared(record)
                renewed += 1
            } catch {
                failed += 1
                logger.info("key \(record.id) from \(record.host) not renewed: \(error.message)")
            }
        }
        return (renewed, failed)
    }

    /// Every registered key, by host then id.
    package func list() throws(KeyError) -> [KeyRecord] {
        try database.all()
    }

    /// One key's record, `nil` if not registered.
    package func record(_ id: KeyID) throws(KeyError) -> KeyRecord? {
        try database.record(id)
    }

    /// The state of `record` for this process.
    package func state(of record: KeyRecord) -> KeyState {
        record.state(masterKeyID: masterKey.id, now: clock())
    }

    // MARK: - Fetching

    /// One origin fetch per id at a time; later callers wait for it.
    ///
    /// `record` is the caller's earlier look at the key. A fetch that finished between that look and this call
    /// (it stored its copy, then left the in-flight table) is not repeated: if the key was fetched since and the
    /// stored copy is valid, that copy is the answer. (Found by KeyLeakTests: a prewarm fetched a key twice.)
    func fetchShared(_ record: KeyRecord, via: OriginURL? = nil) async throws(KeyError) -> [UInt8] {
        let task = withInFlight { tasks in
            if let existing = tasks[record.id] { return existing }
            let task = Task<[UInt8], any Error> {
                defer { self.withInFlight { $0[record.id] = nil } }
                if let current = try? self.database.record(record.id), current.isStored, current.fetchedAt != record.fetchedAt,
                    current.state(masterKeyID: self.masterKey.id, now: self.clock()) == .valid, let plain = self.open(current)
                {
                    return plain
                }
                return try await self.fetchAndStore(record, via: via)
            }
            tasks[record.id] = task
            return task
        }
        do {
            return try await task.value
        } catch let error as KeyError {
            throw error
        } catch {
            throw KeyError.keyUnavailable.with("\(error)")
        }
    }

    private func fetchAndStore(_ record: KeyRecord, via: OriginURL?) async throws(KeyError) -> [UInt8] {
        let id = record.id
        do throws(KeyError) {
            let url: OriginURL
            do {
                url = try OriginURL(record.url)
            } catch {
                throw KeyError.keyUnavailable.with("the key URL of \(id) is not usable: \(error)")
            }
            let response: OriginResponse
            do throws(OriginError) {
                response = try await fetcher.fetch(via ?? url, headers: itemHeaders(record), maxBytes: configuration.maxResponseBytes)
            } catch {
                let unavailable =
                    error == .network || error == .timeout || error == .truncated
                    || (error == .httpStatus && (error.originStatus >= 500 || error.originStatus == 408 || error.originStatus == 429))
                // A key whose URL the destination policy refuses stays a 403, as the same URL through the proxy is.
                throw KeyError.keyUnavailable.withStatus(error == .forbiddenDestination ? 403 : 502).with(
                    "origin \(url.host): \(error.message)"
                )
                .transient(unavailable)
            }
            let body = Array(response.body.readableBytesView)
            guard response.status == 200 || response.status == 203 else {
                let status = response.status
                throw KeyError.keyUnavailable.with("origin \(url.host) answered \(response.status) for key \(id)")
                    .transient(status >= 500 || status == 408 || status == 429)
            }
            guard KeyService.fits(body.count, method: record.method) else {
                // Not stored: a wrong-sized answer (an error page, a truncated body, a key of another method) would
                // be served as the key until it expires.
                throw KeyError.keyUnavailable.with(
                    "origin \(url.host) sent \(body.count) bytes for key \(id); \(KeyService.expectedSize(method: record.method))")
            }
            let now = clock()
            // The items' limit is kept apart (KeyRecord.itemExpiresAt) and may move later: a longer-lived item
            // taking the key up extends it without a refetch.
            let expiresAt = KeyExpiry.earliest(
                KeyExpiry.origin(headers: response.headers, now: now), configuration.ttl.map { now.addingTimeInterval($0.seconds) },
                withLiveLifetimes { $0.value(forKey: id) }.map { now.addingTimeInterval($0) })
            let sealed: [UInt8]
            do {
                sealed = try AES256GCM.seal(body, key: masterKey.bytes, aad: KeyService.aad(id))
            } catch {
                throw KeyError.storage.with("cannot seal key \(id): \(error)")
            }
            try database.store(id: id, sealed: sealed, masterKeyID: masterKey.id, fetchedAt: now, expiresAt: expiresAt)
            withReportedUnreadable { _ = $0.remove(id) }
            logger.debug("key \(id) from \(url.host) stored, expires \(expiresAt.map { "\($0)" } ?? "never")")
            withCounters { $0.fetches += 1 }
            return body
        } catch {
            withCounters { $0.fetchFailures += 1 }
            try? database.recordFailure(id: id, message: error.message)
            throw error
        }
    }

    /// The plaintext of a stored copy, `nil` when it cannot be decrypted (another master key, damage).
    private func open(_ record: KeyRecord) -> [UInt8]? {
        guard let sealed = record.sealed else { return nil }
        if record.masterKeyID == masterKey.id, let plain = try? AES256GCM.open(sealed, key: masterKey.bytes, aad: KeyService.aad(record.id))
        {
            // A copy of another length than the key's method now says (the playlist changed it): fetched again.
            return KeyService.fits(plain.count, method: record.method) ? plain : nil
        }
        let first = withReportedUnreadable { $0.insert(record.id).inserted }
        if first {
            logger.warning(
                "stored key \(record.id) (\(record.host)) cannot be decrypted: sealed with master key \(record.masterKeyID ?? "?"), this process has \(masterKey.id); refetching it from the origin"
            )
        }
        return nil
    }

    /// The item's headers recorded with the key; none when there are none or they cannot be opened (another
    /// master key: the fetch then goes out with the origin's configured headers only).
    private func itemHeaders(_ record: KeyRecord) -> [(String, String)] {
        guard let sealed = record.sealedHeaders,
            let plain = try? AES256GCM.open(sealed, key: masterKey.bytes, aad: KeyService.headersAAD(record.id)),
            let pairs = try? JSONDecoder().decode([[String]].self, from: Data(plain))
        else { return [] }
        return pairs.compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
    }

    /// The id is bound to the sealed box, so a box copied onto another row does not open.
    private static func aad(_ id: KeyID) -> [UInt8] { Array(("hlscache-key:" + id.value).utf8) }
    private static func headersAAD(_ id: KeyID) -> [UInt8] { Array(("hlscache-key-headers:" + id.value).utf8) }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
