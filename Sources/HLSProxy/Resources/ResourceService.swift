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
    let keysShareCacheKeys: Bool
    /// What is known about recently requested targets: players ask for the same ones again and again, and
    /// parsing the URL, making its cache key and rendering a hit's head were most of a hit's own work.
    let targets = NIOLockedValueBox(BoundedLRU<String, TargetMemo>(maxCount: ResourceService.maxRememberedTargets))
    /// Large objects asked for by range, stored as slices (Slices/).
    private let slices: SliceService
    /// `prefetch.through`: read-ahead asks a fleet's balancer instead of the origin.
    private let readAheadThrough: ReadAheadThrough?
    /// How many times a miss looks in the store again because downloads ended during its lookup (``LookedUp``) before
    /// it downloads anyway: each look is short, and on a busy server some download ends during almost any of them.
    static let maxStoreLooks = 3
    /// Bound on ``targets`` (least recently used out): with replayed heads each entry is about 1.5-3 KB.
    static let maxRememberedTargets = 8_192

    init(services: ProxyServices) {
        self.services = services
        self.slices = SliceService(services: services)
        self.readAheadThrough = services.configuration.prefetchThrough.map(ReadAheadThrough.init(server:))
        self.keysShareCacheKeys = services.keys.configuration.volatileQueryParameters == services.configuration.volatileQueryParameters
    }

    /// LL-HLS blocking-reload parameters: such requests go to the origin every time.
    static let blockingReloadParameters: Set<String> = ["_HLS_msn", "_HLS_part", "_HLS_skip"]

    /// `target`: the request's, or the proxied URL after `/rewind` (``Responder/wantsRewind``).
    func handle(_ request: ProxyRequest, target: String, responder: Responder) {
        let memo: TargetMemo
        if let known = targets.withLockedValue({ $0.value(forKey: target) }) {
            memo = known
        } else {
            do {
                // Kodi's `|User-Agent=…&Referer=…` after the URL (a channel list's, sent on by a player that does not
                // know it): the headers go with the origin requests for the URL, never the suffix itself.
                let suffix = OriginURL.splittingHeaderSuffix(of: target)
                let url = try OriginURL(proxyTarget: suffix?.target ?? target)
                if let suffix, !suffix.headers.isEmpty { services.playlists.learnHeaders(suffix.headers, for: url) }
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
        // The player's own request goes first; read-ahead follows it. Not after another node's read-ahead through the
        // balancer (``ReadAheadThrough``): that node reads ahead for its player already.
        let readsAhead = !blocking && !ReadAheadThrough.isReadAhead(request)
        defer { if readsAhead { readAhead(after: key) } }
        if !blocking {
            if let live = services.playlists.livePlaylist(key) {
                if sendPreparedLive(live, responder: responder) {
                    responder.replayedAnswer = .live(target: memo.resolved)
                } else {
                    responder.route = .playlist
                    responder.cacheResult = .live
                    services.playlists.respond(with: live, to: responder, cache: "HIT")
                }
                return
            }
            if let replay = memo.replay, replayHit(replay, target: memo.resolved, request: request, responder: responder) { return }
            // The stored copies of a multivariant playlist are its plain form: `/rewind/…` makes its own (servePlaylist).
            if !responder.wantsRewind, let playlist = memo.playlistReplay,
                replayPlaylistHit(playlist, memo: memo, request: request, responder: responder)
            {
                return
            }
            let seen = services.fetches.removals
            if serveStored(request, target: target, memo: memo, responder: responder) { return }
            miss(
                request, key: key, url: url, cacheable: true, responder: responder,
                lookedUp: LookedUp(removalsSeen: seen) { self.serveStored(request, target: target, memo: memo, responder: responder) })
            return
        }
        miss(request, key: key, url: url, cacheable: !blocking, responder: responder)
    }

    /// Serves what the store has for `memo`'s target; false when it has nothing to serve (a miss).
    private func serveStored(_ request: ProxyRequest, target: String, memo: TargetMemo, responder: Responder) -> Bool {
        let (url, key) = (memo.url, memo.key)
        switch lookUp(key, url: url) {
        case .hit(let object, let pin):
            return serveFile(
                object, pin: pin, headers: fileHeaders(object), request: request, responder: responder,
                replay: .object(target, current: memo.replay))
        case .playlistHit(let object, let pin):
            responder.route = .playlist
            responder.cacheResult = .hit
            servePlaylist(
                object, pin: pin, key: key, url: url, request: request, responder: responder, replay: (target, memo.playlistReplay))
            return true
        case .playlistForOtherTokens:
            refetchPlaylist(request, key: key, url: url, responder: responder)
            return true
        case .miss:
            return false
        }
    }

    /// A miss found by a store lookup: the downloads that had ended when it began (``FetchRegistry/removals``), and
    /// how to look again. A download that ends during the lookup stores its object, then leaves the table; the miss
    /// would find neither and fetch the object a second time. The lookup can be long: a key not in this process's map
    /// is read from the index on disk, on a loaded machine while the download's own commit writes it.
    struct LookedUp {
        var removalsSeen: UInt64
        /// Serves the stored object; false when there is none.
        var serveStored: () -> Bool
    }

    /// What the disk cache has for `key` (``CacheLookup``). A key-sized leftover is removed on the way.
    private func lookUp(_ key: CacheKey, url: OriginURL) -> CacheLookup {
        guard let (object, pin) = services.store.lookupAndPin(key) else { return .miss }
        let stored = CacheLookup.classify(kind: object.kind, size: object.size) {
            services.playlists.hasOtherTokens(than: url, key: key, stored: object)
        }
        switch stored {
        case .object: return .hit(object, pin)
        case .playlist: return .playlistHit(object, pin)
        case .playlistForOtherTokens:
            pin.unpin()
            return .playlistForOtherTokens
        case .keySizedLeftover:
            pin.unpin()
            dropKeySized(key)
            return .miss
        }
    }

    /// Removes a stored key-sized object (an older version kept a key in clear):
    /// the request is served as a miss, which does not store it again (``KeySizedBody``).
    private func dropKeySized(_ key: CacheKey) {
        let store = services.store
        let logger = services.logger
        services.runBlocking { try store.remove(key) }.whenFailure { error in
            logger.warning("cannot remove a stored 16-byte object", metadata: ["error": "\(error)"])
        }
    }

    /// Answers a plain GET or HEAD of an object served whole before with the head rendered then, if the object
    /// is still the same. False: take the ordinary path (which renders a new replay when it serves a hit).
    private func replayHit(_ replay: HitReplay, target: ResolvedTarget, request: ProxyRequest, responder: Responder) -> Bool {
        guard request.isPlainFetch, responder.sendsPlainKeepAlive, !responder.echoesOrigin else { return false }
        guard sendFromMemory(replay, responder: responder) || sendReplayedFile(replay, responder: responder) else { return false }
        responder.replayedAnswer = .object(replay, target: target)
        return true
    }

    /// Sends `replay`'s object from the memory tier, else from its file (and reads it into the memory tier for the
    /// next hits). False when the object changed or its file does not match: take the ordinary path.
    func sendReplayed(_ replay: HitReplay, responder: Responder) -> Bool {
        sendFromMemory(replay, responder: responder) || sendReplayedFile(replay, responder: responder)
    }

    /// Sends `replay`'s object from its file (the memory tier was asked already).
    func sendReplayedFile(_ replay: HitReplay, responder: Responder) -> Bool {
        guard let pin = services.store.pinIfUnchanged(replay.object) else { return false }
        guard let handle = openMatching(replay.object) else {
            pin.unpin()
            return false
        }
        // Served from its file: read into the memory tier in the background if it has earned a place there.
        services.memory.sendingFile(of: replay.object, headOnly: responder.request.isHead)
        services.memory.load(replay.object, store: services.store, threadPool: services.threadPool)
        responder.cacheResult = .hit
        responder.sendPrepared(
            replay.head, headers: replay.headers, body: .file(handle, offset: 0, length: replay.object.size, release: { pin.unpin() }))
        return true
    }

    /// Starts background fetches of the next segments of the playlist `key` belongs to, and cancels the
    /// read-ahead of a variant the player just left.
    func readAhead(after key: CacheKey) {
        // A window found stored before is not asked about again while the store is unchanged (a player walking a
        // stored library asked the store three times per hit for nothing).
        let generation = services.store.generation
        let index = services.playlists.readAhead
        let plan = index.requested(key, generation: generation)
        for cancelled in plan.cancel { services.fetches.existing(.stored(cancelled))?.cancelIfUnwatched() }
        // Not in flight, not stored whole, not stored as slices (a large segment with a validator, which a read-ahead
        // would fetch whole again). A download that ended during the lookups may have been this one's, stored
        // meanwhile (``LookedUp``): the store is asked once more first.
        var allStored = !plan.prefetch.isEmpty
        defer { if allStored { index.windowStored(after: key, generation: generation) } }
        for segment in plan.prefetch {
            guard services.fetches.existing(.stored(segment.key)) == nil else {
                allStored = false
                continue
            }
            let seen = services.fetches.removals
            guard services.store.lookup(segment.key) == nil, services.store.sliceSet(of: segment.key, layout: slices.layout) == nil
            else { continue }
            allStored = false
            if let readAheadThrough {
                readAheadThrough.request(segment, services: services)
            } else {
                if originFetch(key: segment.key, url: segment.url, cacheable: true, purpose: .readAhead, unlessRemovedSince: seen) == nil,
                    services.store.lookup(segment.key) == nil
                {
                    _ = originFetch(key: segment.key, url: segment.url, cacheable: true, purpose: .readAhead)
                }
            }
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
            services.logger.notice(
                "a stored file does not match its index entry (replaced or damaged); treated as a miss",
                metadata: ["path": "\(object.path)"])
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
        if services.memory.admits(object),
            let body = services.memory.bodyToSend(
                of: object, on: responder.largeSendHold, alone: responder.aloneOnLoop, headOnly: request.isHead,
                counted: &responder.memoryTierCounted)
        {
            pin.unpin()
            source = .memory(body)
        } else {
            guard let handle = openMatching(object) else {
                pin.unpin()
                return false
            }
            // Served from its file: read into the memory tier in the background if it has earned a place there.
            services.memory.sendingFile(of: object, headOnly: request.isHead)
            services.memory.load(object, store: services.store, threadPool: services.threadPool)
            source = .file(handle, pin)
        }
        let lastModified = Int64((object.lastModified ?? object.createdAt).timeIntervalSince1970)
        var headers = headers
        headers.add(name: "ETag", value: object.etag)
        headers.add(name: "Last-Modified", value: HTTPDate.format(lastModified))
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
        if !request.isHead,
            ConditionalRequest.ifRangeAllowsPartial(request.header("If-Range"), etag: object.etag, lastModified: lastModified)
        {
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
        // `/rewind/…`: made from the raw copy each time (``RewrittenPlaylist/rewound``), the stored copies left as they are.
        let rewind = responder.wantsRewind
        if !rewind, gzipClient, let (gzip, gzipPin) = store.lookupAndPin(PlaylistService.gzipKey(key)),
            serveFile(
                gzip, pin: gzipPin, headers: services.playlists.fileHeaders(gzip: true), request: request, responder: responder,
                replay: replayTarget)
        {
            pin.unpin()
            return
        }
        if !rewind, let (rewritten, rewrittenPin) = store.lookupAndPin(PlaylistService.rewrittenKey(key)),
            serveFile(
                rewritten, pin: rewrittenPin, headers: services.playlists.fileHeaders(gzip: false), request: request, responder: responder,
                replay: replayTarget)
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
                return try playlists.process(
                    raw: bytes, key: key, url: base, store: !rewind, fromStore: true, tokens: raw.tokens, contentType: raw.contentType)
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
        let join = originFetch(key: key, url: url, cacheable: true)
        responder.route = .playlist
        responder.cacheResult = join.cacheResult(stored: true)
        subscribe(responder, to: join.fetch, started: join.isStarted, range: nil, key: key, url: url, cacheable: true) { [self] error in
            guard let (object, pin) = services.store.lookupAndPin(key), object.kind == .playlist else {
                responder.send(error: error)
                return
            }
            services.logger.debug(
                "playlist refetch for new tokens failed; serving the stored one",
                metadata: ["url": "\(url.redacted)", "error": "\(error.code)"])
            responder.cacheResult = .hit
            servePlaylist(object, pin: pin, key: key, url: url, request: request, responder: responder)
        }
    }

    // MARK: - Misses

    private func miss(
        _ request: ProxyRequest, key: CacheKey, url: OriginURL, cacheable: Bool, responder: Responder, lookedUp: LookedUp? = nil
    ) {
        let inFlight = services.fetches.existing(FetchKey(key: key, url: url, cacheable: cacheable))
        let range = request.header("Range")
        switch MissRoute.decide(
            range: range, isHead: request.isHead, pathExtension: url.pathExtension, cacheable: cacheable, inFlight: inFlight?.missRouteView)
        {
        case .joinRange(let first, let last):
            responder.cacheResult = .coalesced
            subscribe(responder, to: inFlight!, started: false, range: (first, last), key: key, url: url, cacheable: cacheable)
        case .rangeNotSatisfiable(let size):
            responder.send(error: ProxyError.rangeNotSatisfiable(size: size), extraHeaders: ["Content-Range": "bytes */\(size)"])
        case .rangeFromSlices:
            // The slices the range covers (Slices/); without slices, a relay and a background fill.
            slices.rangeMiss(
                request, key: key, url: url, range: range!, responder: responder,
                backgroundFill: { _ = self.originFetch(key: key, url: url, cacheable: true, purpose: .background) },
                withoutSlices: {
                    self.rangeRelay(
                        request, key: key, url: url, range: range!, cacheable: cacheable, background: true, responder: responder)
                })
        case .rangeRelay:
            rangeRelay(request, key: key, url: url, range: range!, cacheable: cacheable, background: false, responder: responder)
        case .whole(let trySlices):
            // An object stored as slices (it was asked for by range) is served from them.
            if trySlices,
                slices.wholeMiss(
                    request, key: key, url: url, responder: responder,
                    withoutSlices: { self.wholeMiss(request, key: key, url: url, cacheable: cacheable, responder: responder) })
            {
                return
            }
            wholeMiss(request, key: key, url: url, cacheable: cacheable, responder: responder, lookedUp: lookedUp)
        }
    }

    /// A range relayed from the origin, not stored; with `background`, the whole resource is fetched into the cache
    /// meanwhile (only while worth storing: a known length within `cache.maxObjectSize`).
    private func rangeRelay(
        _ request: ProxyRequest, key: CacheKey, url: OriginURL, range: String, cacheable: Bool, background: Bool, responder: Responder
    ) {
        if background { _ = originFetch(key: key, url: url, cacheable: cacheable, purpose: .background) }
        responder.cacheResult = .passthrough
        PassthroughRelay.start(request: request, url: url, range: range, responder: responder, services: services) {
            // The origin says it is a playlist after all: answer with the whole rewritten playlist.
            self.miss(request.withoutRange, key: key, url: url, cacheable: cacheable, responder: responder)
        }
    }

    /// The whole resource, through the shared download of its key. After a store lookup (`lookedUp`), a download
    /// that ended meanwhile sends the request back to the store (a few times at most: then it downloads).
    private func wholeMiss(
        _ request: ProxyRequest, key: CacheKey, url: OriginURL, cacheable: Bool, responder: Responder, lookedUp: LookedUp? = nil
    ) {
        if let lookedUp {
            var seen = lookedUp.removalsSeen
            for _ in 0..<Self.maxStoreLooks {
                if let join = originFetch(key: key, url: url, cacheable: cacheable, unlessRemovedSince: seen) {
                    return stream(join, key: key, url: url, cacheable: cacheable, responder: responder)
                }
                seen = services.fetches.removals
                if lookedUp.serveStored() { return }
            }
        }
        stream(originFetch(key: key, url: url, cacheable: cacheable), key: key, url: url, cacheable: cacheable, responder: responder)
    }

    /// Answers from the download `join` gave, counted by how it was joined.
    private func stream(
        _ join: FetchJoin<SharedFetch>, key: CacheKey, url: OriginURL, cacheable: Bool, responder: Responder
    ) {
        responder.cacheResult = join.cacheResult(stored: cacheable)
        subscribe(responder, to: join.fetch, started: join.isStarted, range: nil, key: key, url: url, cacheable: cacheable)
    }
}
