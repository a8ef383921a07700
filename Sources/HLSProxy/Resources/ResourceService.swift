import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Answers `/{scheme}/{authority}/{path}` requests: from the disk cache when it has the resource, otherwise
/// from the origin through a ``SharedFetch`` that caches on the way.
final class ResourceService: Sendable {
    let services: ProxyServices
    /// The key service makes cache keys like the proxy does, so a request's cache key finds a registered key.
    private let keysShareCacheKeys: Bool
    /// What is known about recently requested targets: players ask for the same ones again and again, and
    /// parsing the URL, making its cache key and rendering a hit's head were most of a hit's own work.
    let targets = NIOLockedValueBox(BoundedLRU<String, TargetMemo>(maxCount: ResourceService.maxRememberedTargets))
    /// Large objects asked for by range, stored as slices (Slices/).
    private let slices: SliceService
    /// Bound on ``targets`` (least recently used out): with replayed heads each entry is about 1.5-3 KB.
    static let maxRememberedTargets = 8_192

    init(services: ProxyServices) {
        self.services = services
        self.slices = SliceService(services: services)
        self.keysShareCacheKeys = services.keys.configuration.volatileQueryParameters == services.configuration.volatileQueryParameters
    }

    /// LL-HLS blocking-reload parameters: such requests go to the origin every time.
    static let blockingReloadParameters: Set<String> = ["_HLS_msn", "_HLS_part", "_HLS_skip"]

    func handle(_ request: ProxyRequest, responder: Responder) {
        let target = request.head.uri
        let memo: TargetMemo
        if let known = targets.withLockedValue({ $0.value(forKey: target) }) {
            memo = known
        } else {
            do {
                let url = try OriginURL(proxyTarget: target)
                let volatile = services.configuration.volatileQueryParameters
                memo = TargetMemo(
                    resolved: ResolvedTarget(
                        url: url, key: CacheKey(url, volatileParameters: volatile),
                        blocking: url.query.map(ResourceService.hasBlockingReloadParameters) ?? false,
                        tokens: CacheKey.volatileSignature(url, volatileParameters: volatile)))
            } catch {
                responder.send(error: ProxyError.badRequest("invalid proxied URL: \(error)"))
                return
            }
            targets.withLockedValue { _ = $0.setValue(memo, forKey: target) }
        }
        handle(request, target: target, memo: memo, responder: responder)
    }

    private func handle(_ request: ProxyRequest, target: String, memo: TargetMemo, responder: Responder) {
        let (url, key) = (memo.url, memo.key)
        // A registered key asked for by its origin URL: send the client to /keys/{id}, where access is
        // checked and the key is stored encrypted; the generic path would cache it in plaintext.
        if let id = keysShareCacheKeys ? services.keys.registeredID(for: key) : services.keys.registeredID(for: url) {
            var headers = HTTPHeaders()
            headers.add(name: "Location", value: id.path(for: url))
            headers.add(name: "Content-Length", value: "0")
            headers.add(name: "Cache-Control", value: "no-store")
            responder.send(status: .temporaryRedirect, headers: headers, body: .empty)
            return
        }
        let blocking = memo.blocking
        // The player's own request goes first; read-ahead follows it.
        defer { if !blocking { readAhead(after: key) } }
        if !blocking {
            if let live = services.playlists.livePlaylist(key) {
                responder.route = .playlist
                responder.cacheResult = .live
                services.playlists.respond(with: live, to: responder, cache: "HIT")
                return
            }
            if let replay = memo.replay, replayHit(replay, request: request, responder: responder) { return }
            if let playlist = memo.playlistReplay, replayPlaylistHit(playlist, memo: memo, request: request, responder: responder) { return }
            if let (object, pin) = services.store.lookupAndPin(key), !dropKeySized(object, pin: pin, key: key) {
                if object.kind == .playlist, services.playlists.hasOtherTokens(than: url, key: key, stored: object) {
                    pin.unpin()
                    refetchPlaylist(request, key: key, url: url, responder: responder)
                    return
                }
                if object.kind == .playlist {
                    responder.route = .playlist
                    responder.cacheResult = .hit
                    servePlaylist(object, pin: pin, key: key, url: url, request: request, responder: responder, replay: (target, memo.playlistReplay))
                    return
                }
                if serveFile(object, pin: pin, headers: fileHeaders(object), request: request, responder: responder, replay: .object(target, current: memo.replay)) {
                    return
                }
            }
        }
        miss(request, key: key, url: url, cacheable: !blocking, responder: responder)
    }

    /// A stored key-sized object (an older version kept a key in clear) is removed
    /// and the request served as a miss, which does not store it again (``KeySizedBody``). Returns whether it was.
    private func dropKeySized(_ object: CachedObject, pin: CachePin, key: CacheKey) -> Bool {
        guard KeySizedBody.isKeySize(object.size), object.kind != .playlist else { return false }
        pin.unpin()
        let store = services.store
        let logger = services.logger
        services.runBlocking { try store.remove(key) }.whenFailure { error in
            logger.warning("cannot remove a stored 16-byte object", metadata: ["error": "\(error)"])
        }
        return true
    }

    /// Answers a plain GET or HEAD of an object served whole before with the head rendered then, if the object
    /// is still the same. False: take the ordinary path (which renders a new replay when it serves a hit).
    private func replayHit(_ replay: HitReplay, request: ProxyRequest, responder: Responder) -> Bool {
        guard request.isPlainFetch, responder.sendsPlainKeepAlive, !responder.echoesOrigin else { return false }
        return sendReplayed(replay, responder: responder)
    }

    /// Sends `replay`'s object from the memory tier, else from its file (and reads it into the memory tier for the
    /// next hits). False when the object changed or its file does not match: take the ordinary path.
    func sendReplayed(_ replay: HitReplay, responder: Responder) -> Bool {
        if sendFromMemory(replay, responder: responder) { return true }
        guard let pin = services.store.pinIfUnchanged(replay.object) else { return false }
        guard let handle = openMatching(replay.object) else {
            pin.unpin()
            return false
        }
        // Served whole from its file a second time: worth a copy in memory (if small enough).
        services.memory.load(replay.object, store: services.store, threadPool: services.threadPool)
        responder.cacheResult = .hit
        responder.sendPrepared(replay.head, headers: replay.headers, body: .file(handle, offset: 0, length: replay.object.size, release: { pin.unpin() }))
        return true
    }

    /// Starts background fetches of the next segments of the playlist `key` belongs to, and cancels the
    /// read-ahead of a variant the player just left.
    private func readAhead(after key: CacheKey) {
        let plan = services.playlists.readAhead.requested(key)
        for cancelled in plan.cancel { services.fetches.existing(cancelled.value)?.cancelIfUnwatched() }
        // Not in flight, not stored whole, not stored as slices (a large segment with a validator, which a read-ahead
        // would fetch whole again).
        for segment in plan.prefetch
        where services.fetches.existing(segment.key.value) == nil && services.store.lookup(segment.key) == nil
            && services.store.sliceSet(of: segment.key, layout: slices.layout) == nil
        {
            let (fetch, created) = services.fetches.join(segment.key.value) {
                SharedFetch(key: segment.key, url: segment.url, cacheable: true, isReadAhead: true, services: services)
            }
            if created { fetch.start() }
        }
    }

    static func hasBlockingReloadParameters(_ query: String) -> Bool {
        query.split(separator: "&").contains { pair in
            let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
            return blockingReloadParameters.contains(String(name))
        }
    }

    // MARK: - Hits

    private func fileHeaders(_ object: CachedObject) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: object.contentType ?? "application/octet-stream")
        return headers
    }

    /// Opens `object`'s file if it is the file the object describes: there, and of its size. Another process may
    /// have replaced it (a new version of another size) or it may have been damaged since this process looked at it;
    /// sending `object.size` bytes of such a file would be wrong bytes, or a response that stalls short of its
    /// length. Then the object is forgotten (the next lookup checks the index and the file again) and nil returned.
    func openMatching(_ object: CachedObject) -> NIOFileHandle? {
        guard let handle = try? NIOFileHandle(_deprecatedPath: object.path) else { return nil }
        let size = try? handle.withUnsafeFileDescriptor { descriptor -> Int64 in
            var status = stat()
            return fstat(descriptor, &status) == 0 ? Int64(status.st_size) : -1
        }
        guard size == object.size else {
            try? handle.close()
            services.store.forget(object)
            services.logger.notice("a stored file does not match its index entry (replaced or damaged); treated as a miss", metadata: ["path": "\(object.path)"])
            return nil
        }
        return handle
    }

    /// Serves a cached object honouring conditional and Range requests: from the memory tier when it holds the
    /// current version (no file opened; the pin is released at once, nothing is read from disk), else its file with
    /// sendfile. Returns false when the file is gone (evicted by the other process): the caller treats it as a miss.
    /// - Parameter replay: the target to remember a ``HitReplay`` under when the whole object is sent, and the
    ///   one remembered now (not rendered again if it is for the same object).
    private func serveFile(
        _ object: CachedObject, pin: CachePin, headers: HTTPHeaders, request: ProxyRequest, responder: Responder,
        replay: ReplayTarget? = nil
    ) -> Bool {
        let source: HitSource
        if services.memory.admits(object), let body = services.memory.body(of: object) {
            pin.unpin()
            source = .memory(body)
        } else {
            guard let handle = openMatching(object) else {
                pin.unpin()
                return false
            }
            // Served from its file by the ordinary path: a second time reads it into the memory tier.
            services.memory.servedFromFile(object, store: services.store, threadPool: services.threadPool)
            source = .file(handle, pin)
        }
        let lastModified = Int64((object.lastModified ?? object.createdAt).timeIntervalSince1970)
        var headers = headers
        headers.add(name: "ETag", value: object.etag)
        headers.add(name: "Last-Modified", value: HTTPDate.cachedFormat(lastModified))
        headers.add(name: "Accept-Ranges", value: "bytes")
        headers.add(name: "X-Cache", value: "HIT")
        responder.cacheResult = .hit
        // RFC 9110 §13.2.2: If-Match / If-Unmodified-Since first (412), then If-None-Match / If-Modified-Since (304).
        let preconditionFails = ConditionalRequest.preconditionFails(
            ifMatch: request.header("If-Match"), ifUnmodifiedSince: request.header("If-Unmodified-Since"), etag: object.etag,
            lastModified: lastModified)
        if preconditionFails
            || ConditionalRequest.isNotModified(
                ifNoneMatch: request.header("If-None-Match"), ifModifiedSince: request.header("If-Modified-Since"), etag: object.etag,
                lastModified: lastModified)
        {
            source.release()
            headers.remove(name: "Content-Type")
            if preconditionFails {
                responder.send(
                    error: ProxyError.preconditionFailed("the cached object does not satisfy If-Match or If-Unmodified-Since"),
                    extraHeaders: headers)
            } else {
                responder.send(status: .notModified, headers: headers, body: .empty)
            }
            return true
        }
        var range = RangeRequest.full
        // Range is defined for GET only (RFC 9110 §14.2): a HEAD with Range is answered whole, as on a miss.
        if !request.isHead, ConditionalRequest.ifRangeAllowsPartial(request.header("If-Range"), etag: object.etag, lastModified: lastModified) {
            range = RangeRequest(header: request.header("Range"), size: object.size)
        }
        switch range {
        case .full:
            headers.add(name: "Content-Length", value: String(object.size))
            if let replay, replay.current?.object != object, request.isPlainFetch, !responder.echoesOrigin {
                remember(HitReplay(object: object, headers: responder.decorated(headers)), as: replay)
            }
            responder.send(status: .ok, headers: headers, body: source.body(offset: 0, length: object.size))
        case .partial(let first, let last):
            headers.add(name: "Content-Length", value: String(last - first + 1))
            headers.add(name: "Content-Range", value: "bytes \(first)-\(last)/\(object.size)")
            responder.send(status: .partialContent, headers: headers, body: source.body(offset: first, length: last - first + 1))
        case .unsatisfiable:
            source.release()
            headers.add(name: "Content-Range", value: "bytes */\(object.size)")
            responder.send(error: ProxyError.rangeNotSatisfiable(size: object.size), extraHeaders: headers)
        }
        return true
    }

    /// A stored playlist: serve the rewritten copy (gzip when accepted); make it from the raw copy if missing
    /// (a playlist stored by `hlscache fetch`).
    /// - Parameter replay: the target to remember the served copy's ``HitReplay`` under (``PlaylistReplay``), and
    ///   the one remembered now.
    private func servePlaylist(
        _ raw: CachedObject, pin: CachePin, key: CacheKey, url: OriginURL, request: ProxyRequest, responder: Responder,
        replay: (target: String, current: PlaylistReplay?)? = nil
    ) {
        let store = services.store
        let gzipClient = request.acceptsGzip
        let replayTarget = replay.map { ReplayTarget.playlist($0.target, raw: raw, forGzipClients: gzipClient, current: $0.current) }
        if gzipClient, let (gzip, gzipPin) = store.lookupAndPin(PlaylistService.gzipKey(key)),
            serveFile(gzip, pin: gzipPin, headers: services.playlists.fileHeaders(gzip: true), request: request, responder: responder, replay: replayTarget)
        {
            pin.unpin()
            return
        }
        if let (rewritten, rewrittenPin) = store.lookupAndPin(PlaylistService.rewrittenKey(key)),
            serveFile(rewritten, pin: rewrittenPin, headers: services.playlists.fileHeaders(gzip: false), request: request, responder: responder, replay: replayTarget)
        {
            pin.unpin()
            return
        }
        let playlists = services.playlists
        // Fetched through a redirect: its relative URIs resolve against the URL that answered, as they did then.
        let base = raw.location.flatMap { try? OriginURL($0) } ?? url
        services.runBlocking(on: responder.eventLoop) { () throws -> RewrittenPlaylist in
            defer { pin.unpin() }
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: raw.path)))
            do {
                return try playlists.process(raw: bytes, key: key, url: base, store: true, fromStore: true, tokens: raw.tokens)
            } catch let error as PlaylistService.StoredLivePlaylist {
                // A live playlist is never served from a stored copy (it would freeze the stream): the copy goes.
                _ = try? store.remove(key)
                throw error
            }
        }.whenComplete { result in
            switch result {
            case .success(let playlist): playlists.respond(with: playlist, to: responder, cache: "HIT")
            case .failure(let error as any HTTPMappableError): responder.send(error: error)
            case .failure:
                // The raw file vanished, is unreadable or was a live playlist: fetch it again.
                self.miss(request, key: key, url: url, cacheable: true, responder: responder)
            }
        }
    }

    /// A stored playlist asked for with other tokens than it was fetched for: fetched again with the request's
    /// tokens, and the stored one served only if the origin fails (playback keeps working offline).
    private func refetchPlaylist(_ request: ProxyRequest, key: CacheKey, url: OriginURL, responder: Responder) {
        let (fetch, created) = services.fetches.join(key.value) { SharedFetch(key: key, url: url, cacheable: true, services: services) }
        if created { fetch.start() }
        responder.route = .playlist
        responder.cacheResult = created ? .miss : .coalesced
        let fallback: (any HTTPMappableError) -> Void = { [self] error in
            guard let (object, pin) = services.store.lookupAndPin(key), object.kind == .playlist else {
                responder.send(error: error)
                return
            }
            services.logger.debug("playlist refetch for new tokens failed; serving the stored one", metadata: ["url": "\(url.redacted)", "error": "\(error.code)"])
            responder.cacheResult = .hit
            servePlaylist(object, pin: pin, key: key, url: url, request: request, responder: responder)
        }
        let subscription = FetchSubscription(responder: responder, fetch: fetch, range: nil, services: services, fallback: fallback)
        if !fetch.subscribe(subscription) {
            services.fetches.remove(fetch)
            fallback(fetch.failure ?? ProxyError.unavailable("origin \(url.host) is failing"))
        }
    }

    // MARK: - Misses

    private func miss(_ request: ProxyRequest, key: CacheKey, url: OriginURL, cacheable: Bool, responder: Responder) {
        let fetchKey = cacheable ? key.value : "blocking " + url.string
        // A playlist is always answered whole and rewritten: a byte range of the origin's raw playlist would hand
        // the player unrewritten URIs (ffmpeg asks for "bytes=0-" on every request). Servers may ignore Range.
        let looksLikePlaylist = MediaTypes.isPlaylist(contentType: nil, pathExtension: url.pathExtension)
        if let rangeHeader = request.header("Range"), !request.isHead, !looksLikePlaylist, !RangeRequest.isWholeFromStart(rangeHeader) {
            // Join an in-flight download only if it already has the start of the range (in memory or in its cache
            // file); otherwise ask the origin for just the range and fill the cache in the background.
            if let existing = services.fetches.existing(fetchKey) {
                let info = existing.progressInfo
                if let head = info.head, !head.isPlaylist, !info.failed, let total = head.contentLength {
                    switch RangeRequest(header: rangeHeader, size: total) {
                    case .partial(let first, let last) where info.received >= first && first >= info.servableFrom:
                        responder.cacheResult = .coalesced
                        subscribe(responder, to: existing, range: (first, last), fetchKey: fetchKey, key: key, url: url, cacheable: cacheable)
                        return
                    case .unsatisfiable:
                        responder.send(error: ProxyError.rangeNotSatisfiable(size: total), extraHeaders: ["Content-Range": "bytes */\(total)"])
                        return
                    default: break
                    }
                }
            } else if cacheable {
                // The slices the range covers (Slices/); without slices, a relay and a background fill.
                slices.rangeMiss(
                    request, key: key, url: url, range: rangeHeader, responder: responder,
                    backgroundFill: { self.backgroundFill(key: key, url: url, fetchKey: fetchKey) },
                    withoutSlices: {
                        self.rangeRelay(request, key: key, url: url, range: rangeHeader, fetchKey: fetchKey, background: true, responder: responder)
                    })
                return
            }
            rangeRelay(request, key: key, url: url, range: rangeHeader, fetchKey: fetchKey, background: false, responder: responder)
            return
        }
        // An object stored as slices (it was asked for by range) is served from them.
        if cacheable, !looksLikePlaylist, services.fetches.existing(fetchKey) == nil,
            slices.wholeMiss(
                request, key: key, url: url, responder: responder,
                withoutSlices: { self.wholeMiss(request, key: key, url: url, fetchKey: fetchKey, cacheable: cacheable, responder: responder) })
        {
            return
        }
        wholeMiss(request, key: key, url: url, fetchKey: fetchKey, cacheable: cacheable, responder: responder)
    }

    /// A range relayed from the origin, not stored; with `background`, the whole resource is fetched into the cache
    /// meanwhile (only while worth storing: a known length within `cache.maxObjectSize`).
    private func rangeRelay(
        _ request: ProxyRequest, key: CacheKey, url: OriginURL, range: String, fetchKey: String, background: Bool, responder: Responder
    ) {
        if background { backgroundFill(key: key, url: url, fetchKey: fetchKey) }
        responder.cacheResult = .passthrough
        PassthroughRelay.start(request: request, url: url, range: range, responder: responder, services: services) {
            // The origin says it is a playlist after all: answer with the whole rewritten playlist.
            self.miss(request.withoutRange, key: key, url: url, cacheable: fetchKey == key.value, responder: responder)
        }
    }

    /// Fetches the whole resource into the cache for no client: it goes on only while worth storing (a known length
    /// within `cache.maxObjectSize`).
    private func backgroundFill(key: CacheKey, url: OriginURL, fetchKey: String) {
        let (fetch, created) = services.fetches.join(fetchKey) {
            SharedFetch(key: key, url: url, cacheable: true, background: true, services: services)
        }
        if created { fetch.start() }
    }

    /// The whole resource, through the shared download of its key.
    private func wholeMiss(_ request: ProxyRequest, key: CacheKey, url: OriginURL, fetchKey: String, cacheable: Bool, responder: Responder) {
        let (fetch, created) = services.fetches.join(fetchKey) {
            SharedFetch(key: key, url: url, cacheable: cacheable, services: services)
        }
        if created { fetch.start() }
        responder.cacheResult = !cacheable ? .passthrough : created ? .miss : .coalesced
        subscribe(responder, to: fetch, range: nil, fetchKey: fetchKey, key: key, url: url, cacheable: cacheable)
    }

    private func subscribe(
        _ responder: Responder, to fetch: SharedFetch, range: (first: Int64, last: Int64)?, fetchKey: String, key: CacheKey, url: OriginURL,
        cacheable: Bool
    ) {
        let subscription = FetchSubscription(responder: responder, fetch: fetch, range: range, services: services)
        if !fetch.subscribe(subscription) {
            // The fetch failed just now; the client gets a fresh attempt rather than someone else's error.
            services.fetches.remove(fetch)
            let (fresh, created) = services.fetches.join(fetchKey) { SharedFetch(key: key, url: url, cacheable: cacheable, services: services) }
            if created { fresh.start() }
            let retry = FetchSubscription(responder: responder, fetch: fresh, range: range, services: services)
            // Failed again before the client could join (a refused destination or a closed port fails at once):
            // this attempt was the client's own, so it gets that failure's status.
            guard !fresh.subscribe(retry) else { return }
            if let failure = fresh.failure {
                responder.send(error: failure)
            } else {
                responder.send(error: ProxyError.unavailable("origin \(url.host) is failing"))
            }
        }
    }
}

/// What ``ResourceService`` remembers about a proxied request target. Copied out of the memo on every request,
/// so it is two references.
struct TargetMemo: Sendable {
    let resolved: ResolvedTarget
    /// The last whole-object hit served for it.
    var replay: HitReplay?
    /// The last whole stored playlist served for it (a playlist's target never has a ``replay``).
    var playlistReplay: PlaylistReplay?

    var url: OriginURL { resolved.url }
    var key: CacheKey { resolved.key }
    var blocking: Bool { resolved.blocking }
}

/// A request target parsed once: its origin URL and cache key.
final class ResolvedTarget: Sendable {
    let url: OriginURL
    let key: CacheKey
    /// Carries LL-HLS blocking-reload parameters: always fetched from the origin.
    let blocking: Bool
    /// The volatile query parameters (tokens) of the URL (``CacheKey/volatileSignature(_:volatileParameters:)``).
    let tokens: String

    init(url: OriginURL, key: CacheKey, blocking: Bool, tokens: String) {
        self.url = url
        self.key = key
        self.blocking = blocking
        self.tokens = tokens
    }
}

/// The 200 response head of a cached object exactly as ``ProxyHTTPHandler`` writes it on a kept-alive
/// HTTP/1.1 connection, rendered once: the next plain GET or HEAD of the same object sends these bytes and the
/// file, without building headers again. The head stops before its `Date` line, which the handler adds (with the
/// blank line) from its event loop's ``DateLine``.
final class HitReplay: Sendable {
    let object: CachedObject
    /// The headers, CORS included (what the route observer is shown).
    let headers: HTTPHeaders
    let head: ByteBuffer

    init(object: CachedObject, headers: HTTPHeaders) {
        self.object = object
        self.headers = headers
        var head = ByteBuffer()
        head.reserveCapacity(512)
        _ = ResponseEncoding.writeHead(
            status: .ok, headers: headers, bodyLength: object.size, chunkedAllowed: true, headOnly: false, connection: nil, terminated: false,
            into: &head)
        self.head = head
    }
}

/// Relays one origin response (a Range request on a miss) straight to the client, without caching.
final class PassthroughRelay: OriginStreamHandler, @unchecked Sendable {
    private let responder: Responder
    private let url: OriginURL
    private let onPlaylist: () -> Void
    private let metrics: ProxyMetrics
    /// Whether this client may receive a 16-byte body (``KeySizedBody``).
    private let mayReceiveKeySized: Bool
    private let startedAt = ContinuousClock.now
    private var headSent = false
    /// A playlist handed to the whole-playlist path, or a key-sized answer refused: the client is answered.
    private var handedOver = false
    /// A head that may belong to a playlist its type does not announce, held until the first bytes tell.
    private var held: OriginResponseHead?
    private var sniffer = PlaylistSniffer()

    private init(responder: Responder, url: OriginURL, metrics: ProxyMetrics, mayReceiveKeySized: Bool, onPlaylist: @escaping () -> Void) {
        self.responder = responder
        self.url = url
        self.metrics = metrics
        self.mayReceiveKeySized = mayReceiveKeySized
        self.onPlaylist = onPlaylist
    }

    /// - Parameter onPlaylist: called instead of relaying when the origin's answer is a playlist.
    static func start(
        request: ProxyRequest, url: OriginURL, range: String, responder: Responder, services: ProxyServices,
        onPlaylist: @escaping () -> Void
    ) {
        let relay = PassthroughRelay(
            responder: responder, url: url, metrics: services.metrics, mayReceiveKeySized: KeySizedBody.mayReceive(request, services: services),
            onPlaylist: onPlaylist)
        var headers: [(String, String)] = [("Range", range)]
        if let ifRange = request.header("If-Range") { headers.append(("If-Range", ifRange)) }
        let task = services.origin.stream(url, headers: headers, on: responder.eventLoop, handler: relay)
        responder.whenCancelled { task.cancel() }
    }

    func didReceiveHead(_ head: OriginResponseHead) {
        metrics.originResponded(after: ContinuousClock.now - startedAt)
        let type = head.headers.first(name: "Content-Type")
        // A segment path its origin labels a playlist is relayed as media (a range cannot be sniffed).
        if MediaTypes.isPlaylist(contentType: type, pathExtension: url.pathExtension),
            !MediaTypes.mightBeMedia(contentType: type, pathExtension: url.pathExtension)
        {
            handedOver = true
            onPlaylist()
            return
        }
        // Players ask for a playlist from its first byte (ffmpeg: "bytes=0-"); only such an answer can tell.
        let fromStart = head.status == 200 || (head.status == 206 && head.headers.first(name: "Content-Range")?.hasPrefix("bytes 0-") == true)
        if fromStart, MediaTypes.mightBePlaylist(contentType: type, pathExtension: url.pathExtension) {
            held = head
            return
        }
        sendHead(head)
    }

    private func sendHead(_ head: OriginResponseHead) {
        guard head.status == 200 || head.status == 206 || head.status == 416 else {
            let error = ProxyError.originStatus(head.status, host: url.host, retryAfter: head.retryAfter)
            metrics.originFailed(code: error.code)
            responder.send(error: error)
            return
        }
        // A part of a 16-byte resource is a part of a key, as far as anyone can tell (KeySizedBody).
        if !mayReceiveKeySized, KeySizedBody.isKeySized(status: head.status, headers: head.headers) {
            handedOver = true
            responder.send(error: KeySizedBody.refusal)
            return
        }
        var headers = HTTPHeaders()
        var originType = head.headers.first(name: "Content-Type")
        if MediaTypes.isPlaylist(contentType: originType, pathExtension: nil) { originType = nil }  // mislabelled media
        headers.add(name: "Content-Type", value: MediaTypes.choose(origin: originType, pathExtension: url.pathExtension))
        for name in ["Content-Length", "Content-Range", "Last-Modified", "ETag", "Accept-Ranges"] {
            if let value = head.headers.first(name: name) { headers.add(name: name, value: value) }
        }
        if !headers.contains(name: "Content-Length") { headers.add(name: "Transfer-Encoding", value: "chunked") }
        headers.add(name: "X-Cache", value: "MISS")
        headSent = true
        responder.beginStream(status: HTTPResponseStatus(statusCode: head.status), headers: headers)
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        if held != nil {
            guard let isPlaylist = sniffer.feed(buffer) else { return responder.eventLoop.makeSucceededVoidFuture() }
            return release(isPlaylist: isPlaylist)
        }
        guard headSent else {
            // Handed over (a playlist) or already answered with an error: stop reading.
            return responder.eventLoop.makeFailedFuture(OriginError.cancelled)
        }
        return responder.write(buffer)
    }

    /// Hands a sniffed playlist over, or sends the held head and the bytes that arrived meanwhile.
    private func release(isPlaylist: Bool) -> EventLoopFuture<Void> {
        guard let head = held else { return responder.eventLoop.makeSucceededVoidFuture() }
        held = nil
        if isPlaylist {
            handedOver = true
            onPlaylist()
            return responder.eventLoop.makeFailedFuture(OriginError.cancelled)  // stop reading the raw playlist
        }
        sendHead(head)
        guard headSent else { return responder.eventLoop.makeFailedFuture(OriginError.cancelled) }
        let body = sniffer.take()
        var last = responder.eventLoop.makeSucceededVoidFuture()
        for chunk in body { last = responder.write(chunk) }
        return last
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        if held != nil, case .success = result {
            _ = release(isPlaylist: sniffer.decisionAtEnd)
        }
        guard !handedOver else { return }
        switch result {
        case .success:
            if headSent { responder.end() }
        case .failure(let error):
            metrics.originFailed(code: error.code)
            if headSent { responder.abort() } else { responder.send(error: error) }
        }
    }
}
