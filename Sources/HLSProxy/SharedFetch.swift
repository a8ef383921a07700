import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import Logging
import NIOConcurrencyHelpers
import NIOCore

/// One origin download shared by every client that asks for the same resource while it is in flight
/// (DESIGN.md §6): the bytes go to the cache file and to each client as they arrive, and a client that joins
/// late first gets what has already arrived, from memory. Playlists are collected whole, rewritten once and
/// handed to every waiting client.
///
/// Thread model: the origin calls the `OriginStreamHandler` methods on its event loop; subscriptions live on
/// their clients' event loops and pull from ``snapshot(from:)``. Shared state sits behind one lock.
final class SharedFetch: OriginStreamHandler, Sendable {
    /// The origin's answer, as far as clients need it.
    struct Head: Sendable {
        var contentLength: Int64?
        var contentType: String
        var isPlaylist: Bool
        /// The origin's ETag when strong (``OriginResponseHead/strongETag``): sent on the miss and stored with the
        /// object, so hits send the same one. A weak or absent one is not used: the store derives a strong one.
        var etag: String?
        var lastModified: String?
        /// The URL that answered (after redirects); playlists resolve against it.
        var url: OriginURL
    }

    enum Outcome: Sendable {
        /// Every byte arrived and matched Content-Length.
        case complete
        /// The playlist, rewritten for the proxy.
        case playlist(RewrittenPlaylist)
        case failed(any HTTPMappableError)
    }

    struct Snapshot {
        var head: Head?
        var chunks: ArraySlice<ByteBuffer>
        /// Offset of the first chunk in `chunks`.
        var offset: Int64
        var outcome: Outcome?
    }

    private struct State {
        var head: Head?
        var chunks: [ByteBuffer] = []
        /// Byte offset of each chunk, so a subscriber's position is an index lookup, not a sum under the lock.
        var chunkOffsets: [Int64] = []
        var received: Int64 = 0
        var outcome: Outcome?
        /// Where the body is being stored (off the event loop), for cacheable non-playlist responses.
        var fill: CacheFill?
        var subscribers: [ObjectIdentifier: FetchSubscription] = [:]
        /// Bytes each subscriber has consumed, for pacing the origin to the slowest client.
        var consumed: [ObjectIdentifier: Int64] = [:]
        var paused: EventLoopPromise<Void>?
        var task: OriginTask?
        /// A head whose type and path leave open whether it is a playlist, until the body's first bytes tell.
        var sniffing: OriginResponseHead?
        var sniffed: [ByteBuffer] = []
    }

    let key: CacheKey
    let url: OriginURL
    /// Whether the result is stored (false for LL-HLS blocking requests, which are per-request).
    let cacheable: Bool
    /// Started by read-ahead rather than by a client; may be cancelled while nobody watches it.
    let isReadAhead: Bool
    private let services: ProxyServices
    private let state = NIOLockedValueBox(State())
    private let startedAt = ContinuousClock.now

    init(key: CacheKey, url: OriginURL, cacheable: Bool, isReadAhead: Bool = false, services: ProxyServices) {
        self.key = key
        self.url = url
        self.cacheable = cacheable
        self.isReadAhead = isReadAhead
        self.services = services
    }

    func start() {
        // A playlist is text worth compressing on the way (the client decodes it); media is asked for as it is.
        let compressed = MediaTypes.isPlaylist(contentType: nil, pathExtension: url.pathExtension)
        let task = services.origin.stream(url, headers: compressed ? [OriginClient.acceptCompressed] : [], handler: self)
        state.withLockedValue { $0.task = task }
    }

    /// Why the fetch failed, once it has.
    var failure: (any HTTPMappableError)? {
        state.withLockedValue { state in
            if case .failed(let error) = state.outcome { return error }
            return nil
        }
    }

    /// Adds a client. Returns false when the fetch can no longer serve a newcomer from the start.
    func subscribe(_ subscription: FetchSubscription) -> Bool {
        let accepted = state.withLockedValue { state -> Bool in
            if case .failed = state.outcome { return false }
            state.subscribers[ObjectIdentifier(subscription)] = subscription
            state.consumed[ObjectIdentifier(subscription)] = 0
            return true
        }
        if accepted { subscription.eventLoop.execute { subscription.pump() } }
        return accepted
    }

    func unsubscribe(_ subscription: FetchSubscription) {
        let resume = state.withLockedValue { state -> EventLoopPromise<Void>? in
            state.subscribers[ObjectIdentifier(subscription)] = nil
            state.consumed[ObjectIdentifier(subscription)] = nil
            return takePauseIfCaughtUp(&state)
        }
        resume?.succeed()
    }

    /// A subscriber consumed up to `offset`; may let a paused origin continue.
    func progress(_ subscription: FetchSubscription, to offset: Int64) {
        let resume = state.withLockedValue { state -> EventLoopPromise<Void>? in
            guard state.consumed[ObjectIdentifier(subscription)] != nil else { return nil }
            state.consumed[ObjectIdentifier(subscription)] = offset
            return takePauseIfCaughtUp(&state)
        }
        resume?.succeed()
    }

    /// Stops a read-ahead nobody is reading (the player switched rendition); nothing half-written is kept.
    /// Returns whether it was cancelled.
    @discardableResult
    func cancelIfUnwatched() -> Bool {
        guard isReadAhead else { return false }
        let unwatched = state.withLockedValue { $0.subscribers.isEmpty && $0.outcome == nil }
        guard unwatched else { return false }
        fail(ProxyError.unavailable("read-ahead of \(url) cancelled"))
        return true
    }

    func snapshot(from chunkIndex: Int) -> Snapshot {
        state.withLockedValue { state in
            let start = min(chunkIndex, state.chunks.count)
            let offset = start < state.chunkOffsets.count ? state.chunkOffsets[start] : state.received
            return Snapshot(head: state.head, chunks: state.chunks[start...], offset: offset, outcome: state.outcome)
        }
    }

    /// Bytes received so far and whether the head is known (for deciding how to serve a Range on a miss).
    var progressInfo: (head: Head?, received: Int64, failed: Bool) {
        state.withLockedValue { state in
            var failed = false
            if case .failed = state.outcome { failed = true }
            return (state.head, state.received, failed)
        }
    }

    private func takePauseIfCaughtUp(_ state: inout State) -> EventLoopPromise<Void>? {
        guard let paused = state.paused else { return nil }
        let slowest = state.consumed.values.min() ?? state.received
        guard state.received - slowest <= Int64(services.configuration.maxInFlightBufferBytes) else { return nil }
        state.paused = nil
        return paused
    }

    private func notifySubscribers() {
        let subscribers = state.withLockedValue { Array($0.subscribers.values) }
        for subscriber in subscribers { subscriber.eventLoop.execute { subscriber.pump() } }
    }

    // MARK: - OriginStreamHandler

    func didReceiveHead(_ head: OriginResponseHead) {
        services.metrics.originResponded(after: ContinuousClock.now - startedAt)
        guard head.status == 200 else {
            let error: any HTTPMappableError =
                (head.status == 206 || head.status == 304)
                ? ProxyError.corrupted("origin \(url.host) answered \(head.status) to a plain GET")
                : ProxyError.originStatus(head.status, host: url.host, retryAfter: head.retryAfter)
            services.metrics.originFailed(code: error.code)
            fail(error)
            return
        }
        let originType = head.headers.first(name: "Content-Type")
        let isPlaylist = MediaTypes.isPlaylist(contentType: originType, pathExtension: url.pathExtension)
        if isPlaylist
            ? MediaTypes.mightBeMedia(contentType: originType, pathExtension: url.pathExtension)
            : MediaTypes.mightBePlaylist(contentType: originType, pathExtension: url.pathExtension)
        {
            state.withLockedValue { $0.sniffing = head }
            return
        }
        begin(head, isPlaylist: isPlaylist)
    }

    /// Sets up the response once it is known whether it is a playlist, and lets the clients see the head.
    private func begin(_ head: OriginResponseHead, isPlaylist: Bool) {
        var originType = head.headers.first(name: "Content-Type")
        // Media its origin called a playlist is sent with its extension's type.
        if !isPlaylist, MediaTypes.isPlaylist(contentType: originType, pathExtension: nil) { originType = nil }
        let contentLength = head.contentLength.map(Int64.init)
        if isPlaylist, let contentLength, contentLength > Int64(services.configuration.maxPlaylistBytes) {
            fail(ProxyError.corrupted("playlist of \(contentLength) bytes is over the \(services.configuration.maxPlaylistBytes)-byte limit"))
            return
        }
        // A 16-byte body is handled as a key: never stored in clear (KeySizedBody).
        let fill =
            cacheable && !isPlaylist && contentLength != KeySizedBody.size
            ? CacheFill(
                store: services.store, key: key, expectedLength: contentLength, threadPool: services.threadPool, logger: services.logger,
                label: url.redacted, failed: { [failures = services.cacheWriteFailures, label = url.redacted] in failures.record($0, label: label) })
            : nil
        let info = Head(
            contentLength: contentLength,
            contentType: isPlaylist ? MediaTypes.playlist : MediaTypes.choose(origin: originType, pathExtension: url.pathExtension),
            isPlaylist: isPlaylist, etag: head.strongETag, lastModified: head.headers.first(name: "Last-Modified"),
            url: head.url)
        state.withLockedValue {
            $0.head = info
            $0.fill = fill
        }
        notifySubscribers()
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let sniffing = state.withLockedValue { state -> (head: OriginResponseHead, buffered: [ByteBuffer])? in
            guard let head = state.sniffing else { return nil }
            state.sniffed.append(buffer)
            return (head, state.sniffed)
        }
        if let sniffing {
            let prefix = sniffing.buffered.lazy.flatMap { $0.readableBytesView }
            guard let isPlaylist = MediaTypes.sniffPlaylist(prefix, complete: false) else {
                return (state.withLockedValue { $0.task?.eventLoop } ?? services.anyEventLoop).makeSucceededVoidFuture()
            }
            return endSniffing(isPlaylist: isPlaylist)
        }
        return receive(buffer)
    }

    /// Decides what the held head is and replays the bytes that arrived meanwhile.
    @discardableResult
    private func endSniffing(isPlaylist: Bool) -> EventLoopFuture<Void> {
        let (head, buffered) = state.withLockedValue { state -> (OriginResponseHead?, [ByteBuffer]) in
            defer { state.sniffing = nil; state.sniffed = [] }
            return (state.sniffing, state.sniffed)
        }
        guard let head else { return services.anyEventLoop.makeSucceededVoidFuture() }
        if isPlaylist { services.logger.debug("origin response sniffed as a playlist", metadata: ["url": "\(url.redacted)"]) }
        begin(head, isPlaylist: isPlaylist)
        var last: EventLoopFuture<Void>?
        for chunk in buffered { last = receive(chunk) }
        return last ?? services.anyEventLoop.makeSucceededVoidFuture()
    }

    private func receive(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let eventLoop = state.withLockedValue { $0.task?.eventLoop }
        let (fill, tooLarge, pause) = state.withLockedValue { state -> (CacheFill?, Bool, EventLoopPromise<Void>?) in
            state.chunkOffsets.append(state.received)
            state.chunks.append(buffer)
            state.received += Int64(buffer.readableBytes)
            let tooLarge = state.head?.isPlaylist == true && state.received > Int64(services.configuration.maxPlaylistBytes)
            var pause: EventLoopPromise<Void>?
            if let eventLoop, let slowest = state.consumed.values.min(),
                state.received - slowest > Int64(services.configuration.maxInFlightBufferBytes)
            {
                let promise = eventLoop.makePromise(of: Void.self)
                state.paused = promise
                pause = promise
            }
            return (state.fill, tooLarge, pause)
        }
        if tooLarge {
            fail(ProxyError.corrupted("playlist is over the \(services.configuration.maxPlaylistBytes)-byte limit"))
            return (eventLoop ?? services.anyEventLoop).makeFailedFuture(OriginError.cancelled)
        }
        fill?.append(buffer)
        if !state.withLockedValue({ $0.head?.isPlaylist ?? false }) { notifySubscribers() }
        return pause?.futureResult ?? (eventLoop ?? services.anyEventLoop).makeSucceededVoidFuture()
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        switch result {
        case .failure(let error):
            if state.withLockedValue({ $0.outcome == nil }) { services.metrics.originFailed(code: error.code) }
            fail(error)
        case .success:
            // A body too short to tell (or empty) was held until now.
            if let prefix = state.withLockedValue({ $0.sniffing == nil ? nil : $0.sniffed }) {
                endSniffing(isPlaylist: MediaTypes.sniffPlaylist(prefix.lazy.flatMap { $0.readableBytesView }, complete: true) ?? false)
            }
            let (head, fill, body, received) = state.withLockedValue { state -> (Head?, CacheFill?, [ByteBuffer], Int64) in
                (state.head, state.fill, state.head?.isPlaylist == true ? state.chunks : [], state.received)
            }
            guard let head else {
                fail(ProxyError.corrupted("origin response ended without a head"))
                return
            }
            if head.isPlaylist {
                finishPlaylist(head: head, body: body)
            } else {
                finish(.complete)
                if let fill, received != KeySizedBody.size {
                    storeSegment(fill, head: head)
                } else {
                    // A body of unknown length that turned out key-sized is not kept either.
                    fill?.abort()
                    services.fetches.remove(self)
                }
            }
        }
    }

    private func fail(_ error: any HTTPMappableError) {
        let (task, fill, first) = state.withLockedValue { state -> (OriginTask?, CacheFill?, Bool) in
            guard state.outcome == nil else { return (nil, nil, false) }
            state.outcome = .failed(error)
            let fill = state.fill
            state.fill = nil
            return (state.task, fill, true)
        }
        guard first else { return }
        fill?.abort()
        task?.cancel()
        services.fetches.remove(self)
        state.withLockedValue { $0.paused }?.succeed()
        notifySubscribers()
    }

    private func finish(_ outcome: Outcome) {
        state.withLockedValue { $0.outcome = outcome }
        notifySubscribers()
    }

    /// Commits the cache entry once every chunk is on disk; until then late joiners are still served from memory.
    private func storeSegment(_ fill: CacheFill, head: Head) {
        let kind: CacheObjectKind = MediaTypes.forExtension(url.pathExtension) == "application/octet-stream" ? .key : .segment
        let lastModified = head.lastModified.flatMap(HTTPDate.parse).map { Date(timeIntervalSince1970: TimeInterval($0)) }
        let expiresAt = services.playlists.liveExpiry(of: key)
        fill.commit(contentType: head.contentType, kind: kind, etag: head.etag, lastModified: lastModified, expiresAt: expiresAt) { _ in
            self.state.withLockedValue { $0.fill = nil }
            self.services.fetches.remove(self)
        }
    }

    private func finishPlaylist(head: Head, body: [ByteBuffer]) {
        var collected: [UInt8] = []
        collected.reserveCapacity(body.reduce(0) { $0 + $1.readableBytes })
        for chunk in body { collected.append(contentsOf: chunk.readableBytesView) }
        let bytes = collected
        services.runBlocking { () throws -> RewrittenPlaylist in
            try self.services.playlists.process(
                raw: bytes, key: self.key, url: head.url, store: self.cacheable, tokens: self.services.playlists.tokenDigest(of: self.url))
        }.whenComplete { result in
            switch result {
            case .success(let playlist):
                if self.cacheable { self.services.playlists.rememberTokens(of: self.url, for: self.key) }
                self.finish(.playlist(playlist))
                self.services.fetches.remove(self)
            case .failure(let error as any HTTPMappableError):
                self.state.withLockedValue { $0.outcome = nil }
                self.fail(error)
            case .failure(let error):
                self.state.withLockedValue { $0.outcome = nil }
                self.fail(ProxyError.corrupted("playlist from \(self.url.host) could not be processed: \(error)"))
            }
        }
    }
}
