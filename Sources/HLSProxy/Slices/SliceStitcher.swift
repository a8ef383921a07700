import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
    import Glibc
#endif

/// Answers one request for a large object from its slices (``SliceLayout``): stored slices go out in order with
/// sendfile, and each run of missing ones is asked of the origin as one `Range` request (``SliceRun``) whose bytes go
/// to the client and into the slices' cache files as they arrive. Memory holds one origin chunk at a time: the next
/// origin read waits for the client and the disk.
///
/// Versions never mix: every slice is checked against the version the response announced (its validator and size,
/// ``SliceSet``). When the origin answers with another version before the response head is sent, that version is
/// served instead; after, the connection is closed (the client sees a short body, never mixed bytes) and the stored
/// slices are dropped, so the next request starts clean. nginx's slice module does the same ("etag mismatch in
/// slice response").
///
/// Bound to the client's event loop: every method runs there (the runs stream on that loop too).
///
/// Why `@unchecked` is safe: it is made and started by the resource service on the request's loop; its runs
/// (``SliceRun``) are origin streams started on that loop, whose callbacks AsyncHTTPClient delivers there; the
/// flights it follows wake it with `eventLoop.execute`; its writes complete on the connection's loop. The entry
/// points assert it in debug builds.
final class SliceStitcher: @unchecked Sendable {
    /// Slices one origin request asks for at most: a request per slice would be a round trip per MiB.
    static let maxRunSlices: Int64 = 8

    private let services: ProxyServices
    private let layout: SliceLayout
    private let key: CacheKey
    private let url: OriginURL
    private let request: ProxyRequest
    private let responder: Responder
    /// The client's `Range` header; nil for the whole object.
    private let rangeHeader: String?
    /// Serves the request as if slices did not exist (the origin ignores `Range`, or the object is too small to be
    /// sliced); only before anything was sent.
    private let fallback: () -> Void

    /// The version being served, once known.
    private var set: SliceSet?
    /// The client's bytes (inclusive), once the size is known.
    private var first: Int64 = 0
    private var last: Int64 = -1
    /// The next byte to send.
    private var position: Int64 = 0
    private var partial = false
    private var headSent = false
    private var done = false
    private var cancelled = false
    private var run: SliceRun?
    /// Every covering slice was stored when the request came (`X-Cache: HIT`).
    private var wasStored = false
    /// Relaying an object that is not stored as slices (small, or without validators).
    private var relaying = false
    /// For a range miss: starts the whole object's background fill when the object is relayed, not sliced.
    private let onRelay: (() -> Void)?

    init(
        services: ProxyServices, layout: SliceLayout, key: CacheKey, url: OriginURL, request: ProxyRequest, responder: Responder,
        rangeHeader: String?, onRelay: (() -> Void)? = nil, fallback: @escaping () -> Void
    ) {
        self.onRelay = onRelay
        self.services = services
        self.layout = layout
        self.key = key
        self.url = url
        self.request = request
        self.responder = responder
        self.rangeHeader = rangeHeader
        self.fallback = fallback
    }

    /// Starts from the stored version `set`, or — nothing stored — by asking the origin for the slices the range
    /// starts in, which tells the size and the version.
    func start(with stored: SliceSet?) {
        responder.eventLoop.assertInEventLoop()
        responder.whenCancelled { [self] in
            cancelled = true
            run?.cancel()
        }
        proceed(with: stored)
    }

    private func proceed(with stored: SliceSet?) {
        if let stored {
            set = stored
            guard resolve() else { return }
            pump()
            return
        }
        guard let startOffset = Self.firstOffset(of: rangeHeader) else {
            if let suffix = Self.suffixLength(of: rangeHeader) {
                // The size is not known: the origin's answer to a suffix run tells it (SliceRun).
                let run = SliceRun(
                    stitcher: self, services: services, layout: layout, key: key, url: url, indices: nil, suffix: suffix,
                    eventLoop: responder.eventLoop)
                self.run = run
                run.start()
            } else {
                fallback()
            }
            return
        }
        let index = layout.index(of: startOffset)
        // Another request fetching this slice: its answer tells the size and the version.
        guard claimOrFollow(index) else { return }
        var end = index
        if let requestedLast = Self.lastOffset(of: rangeHeader) {
            let last = min(layout.index(of: requestedLast), index + Self.maxRunSlices - 1)
            while end < last, claim(end + 1) { end += 1 }
        }
        startRun(index...end)
    }

    private func claim(_ index: Int64) -> Bool {
        services.sliceFlights.claim(layout.key(of: key, slice: index).value)
    }

    /// Claims slice `index` for a run of this request (true), or — another request's run is fetching it — follows
    /// that run (false).
    private func claimOrFollow(_ index: Int64) -> Bool {
        let sliceKey = layout.key(of: key, slice: index).value
        while true {
            if services.sliceFlights.claim(sliceKey) { return true }
            if let flight = services.sliceFlights.flight(sliceKey) {
                follow(flight, index: index)
                return false
            }
        }
    }

    /// Sends slice `index` as another request's run writes it (``SliceFlight``): from its temp file with sendfile, up
    /// to what is written, then waits for more. Nothing is held in memory, and the origin is asked once. When the run is
    /// over the slice is read from the store (stored) or fetched by this request (given up); a run of another version
    /// than this response's is not followed (its outcome is awaited, then the slice is treated as any).
    private func follow(_ flight: SliceFlight, index: Int64) {
        responder.eventLoop.assertInEventLoop()
        guard !cancelled, !done else { return }
        let progress = flight.progress
        if let stored = progress.outcome {
            guard set != nil else {
                proceed(with: services.store.sliceSet(of: key, layout: layout))
                return
            }
            if stored { set?.present.insert(index) }
            pump()
            return
        }
        guard let announced = progress.set else { return waitForChange(of: flight, after: progress.changes, index: index) }
        guard let set else {
            // Nothing known yet: the run's answer tells the size and the version.
            self.set = SliceSet(
                validator: announced.validator, objectSize: announced.objectSize, contentType: announced.contentType,
                lastModified: announced.lastModified, present: [])
            guard resolve() else { return }
            pump()
            return
        }
        guard announced.validator == set.validator, announced.objectSize == set.objectSize else {
            return waitForChange(of: flight, after: progress.changes, index: index)
        }
        let slice = layout.bytes(of: index, total: set.objectSize)
        let available = slice.first + progress.written
        guard position >= slice.first, position <= slice.last else {
            pump()
            return
        }
        guard let file = progress.file, available > position else {
            return waitForChange(of: flight, after: progress.changes, index: index)
        }
        let end = min(last, available - 1)
        sendHead()
        responder.writeFile(file, offset: position - slice.first, length: end - position + 1).whenComplete { [self] result in
            switch result {
            case .success:
                position = end + 1
                if position > last || position > slice.last { pump() } else { follow(flight, index: index) }
            case .failure:
                // The client went away (or the descriptor could not be duplicated): nothing more to send.
                if !done { responder.abort() }
                done = true
            }
        }
    }

    private func waitForChange(of flight: SliceFlight, after changes: Int, index: Int64) {
        let eventLoop = responder.eventLoop
        let waiting = flight.whenChanged(after: changes) { [self] in
            eventLoop.execute { [self] in follow(flight, index: index) }
        }
        if !waiting { follow(flight, index: index) }
    }

    // MARK: - The response

    /// Resolves the client's range and preconditions against ``set``; false when that answered the request (304,
    /// 412, 416) or there is nothing more to send (HEAD).
    private func resolve() -> Bool {
        guard let set else { return false }
        let lastModified = set.lastModified.map { Int64($0.timeIntervalSince1970) } ?? Int64.max
        let etag = set.validator
        if ConditionalRequest.preconditionFails(
            ifMatch: request.header("If-Match"), ifUnmodifiedSince: request.header("If-Unmodified-Since"), etag: etag,
            lastModified: lastModified)
        {
            done = true
            responder.send(error: ProxyError.preconditionFailed("the cached object does not satisfy If-Match or If-Unmodified-Since"))
            return false
        }
        if ConditionalRequest.isNotModified(
            ifNoneMatch: request.header("If-None-Match"), ifModifiedSince: request.header("If-Modified-Since"), etag: etag,
            lastModified: lastModified)
        {
            done = true
            responder.cacheResult = .hit
            responder.send(status: .notModified, headers: validatorHeaders(set), body: .empty)
            return false
        }
        var range = RangeRequest.full
        if !request.isHead, ConditionalRequest.ifRangeAllowsPartial(request.header("If-Range"), etag: etag, lastModified: lastModified) {
            range = RangeRequest(header: rangeHeader, size: set.objectSize)
        }
        switch range {
        case .full:
            (first, last, partial) = (0, set.objectSize - 1, false)
        case .partial(let from, let to):
            (first, last, partial) = (from, to, true)
        case .unsatisfiable:
            done = true
            var headers = HTTPHeaders()
            headers.add(name: "Content-Range", value: "bytes */\(set.objectSize)")
            responder.send(error: ProxyError.rangeNotSatisfiable(size: set.objectSize), extraHeaders: headers)
            return false
        }
        position = first
        // A hit when every slice the response covers is stored (a HEAD too).
        wasStored = (layout.index(of: first)...layout.index(of: max(first, last))).allSatisfy { set.present.contains($0) }
        if request.isHead {
            sendHead()
            finish()
            return false
        }
        return true
    }

    private func validatorHeaders(_ set: SliceSet) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: set.validator)
        if let lastModified = set.lastModified {
            headers.add(name: "Last-Modified", value: HTTPDate.cachedFormat(Int64(lastModified.timeIntervalSince1970)))
        }
        return headers
    }

    private func sendHead() {
        guard !headSent, let set else { return }
        headSent = true
        var headers = set.validator.isEmpty ? HTTPHeaders() : validatorHeaders(set)
        headers.add(name: "Content-Type", value: set.contentType ?? MediaTypes.choose(origin: nil, pathExtension: url.pathExtension))
        headers.add(name: "Accept-Ranges", value: "bytes")
        headers.add(name: "Content-Length", value: String(last - first + 1))
        if partial { headers.add(name: "Content-Range", value: "bytes \(first)-\(last)/\(set.objectSize)") }
        headers.add(name: "X-Cache", value: wasStored ? "HIT" : "MISS")
        responder.cacheResult = wasStored ? .hit : relaying ? .passthrough : .miss
        responder.beginStream(status: partial ? .partialContent : .ok, headers: headers)
    }

    private func finish() {
        guard !done else { return }
        done = true
        responder.end()
    }

    /// Sends the next stored slice, or asks the origin for the next run of missing ones; ends the response after
    /// the last byte.
    private func pump() {
        guard !cancelled, !done, run == nil, var set else { return }
        while position <= last {
            let index = layout.index(of: position)
            let slice = layout.bytes(of: index, total: set.objectSize)
            if set.present.contains(index) {
                if let (object, pin) = services.store.lookupAndPin(layout.key(of: key, slice: index)), set.contains(object),
                    object.size == slice.last - slice.first + 1, let file = Self.open(object)
                {
                    sendHead()
                    let end = min(last, slice.last)
                    responder.writeFile(file, offset: position - slice.first, length: end - position + 1).whenComplete { [self] result in
                        pin.unpin()
                        switch result {
                        case .success:
                            position = end + 1
                            pump()
                        case .failure:
                            // The client went away (or the descriptor could not be duplicated): nothing more to send.
                            if !done { responder.abort() }
                            done = true
                        }
                    }
                    return
                }
                // Evicted (or replaced) since the set was read: fetched like any missing slice.
                set.present.remove(index)
                self.set = set
            }
            guard claimOrFollow(index) else { return }
            var end = index
            let lastIndex = layout.index(of: last)
            while end < lastIndex, end - index + 1 < Self.maxRunSlices, !set.present.contains(end + 1), claim(end + 1) { end += 1 }
            startRun(index...end)
            return
        }
        sendHead()
        finish()
    }

    private func startRun(_ indices: ClosedRange<Int64>) {
        let run = SliceRun(
            stitcher: self, services: services, layout: layout, key: key, url: url, indices: indices, eventLoop: responder.eventLoop)
        self.run = run
        run.start()
    }

    /// Opens a stored slice's file, checking that it is the file its row describes (there, of its size).
    static func open(_ object: CachedObject) -> GrowingFile? {
        let descriptor = Glibc.open(object.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var status = stat()
        guard fstat(descriptor, &status) == 0, Int64(status.st_size) == object.size else {
            close(descriptor)
            return nil
        }
        return GrowingFile(descriptor: descriptor)
    }

    // MARK: - Runs (called by SliceRun on the event loop)

    /// A run's origin head. Returns the version the run's bytes belong to and whether to store them as slices, or
    /// nil when the run must stop (this request was answered otherwise).
    func runAnswered(_ run: SliceRun, head: OriginResponseHead, firstByte: Int64) -> (set: SliceSet, store: Bool)? {
        responder.eventLoop.assertInEventLoop()
        guard !cancelled, !done else { return nil }
        let range = head.status == 206 ? head.headers.first(name: "Content-Range").flatMap(SliceResponse.parse) : nil
        guard let range, range.first == firstByte else {
            // The origin ignores Range (200), fails, or answers other bytes: served as without slices while nothing is
            // sent (with nothing stored, the path without slices relays even errors as it always did).
            stop(
                unlessFallback: set == nil || head.status == 200
                    ? nil : ProxyError.originStatus(head.status, host: url.host, retryAfter: head.retryAfter))
            return nil
        }
        let answer = SliceResponse(
            contentRange: head.headers.first(name: "Content-Range"), strongETag: head.strongETag,
            lastModified: head.headers.first(name: "Last-Modified"))
        // Without a validator, versions cannot be told apart: such an object is relayed, never stored as slices.
        let sliceable = answer != nil && layout.isSliced(total: range.total)
        let validator = answer?.validator ?? head.strongETag ?? ""
        if let known = set, known.validator != validator || known.objectSize != range.total || (!relaying && !sliceable) {
            services.logger.notice(
                "slices of another version: the origin's validator or size changed", metadata: ["url": "\(url.redacted)"])
            if !relaying { dropStoredSlices() }
            if headSent {
                done = true
                responder.abort()
                return nil
            }
            set = nil
        }
        if set == nil {
            if !sliceable {
                // A small object (or one without validators) asked for by range: this answer is relayed, and the
                // whole object fetched into the cache meanwhile, as before slices. A playlist, or what may be one, and
                // a key-sized body take the path without slices, which checks them.
                let type = head.headers.first(name: "Content-Type")
                guard let relayed = onRelay, !KeySizedBody.isKeySize(range.total),
                    !MediaTypes.isPlaylist(contentType: type, pathExtension: nil),
                    firstByte > 0 || !MediaTypes.mightBePlaylist(contentType: type, pathExtension: url.pathExtension)
                else {
                    stop(unlessFallback: nil)
                    return nil
                }
                relaying = true
                relayed()
            }
            set = SliceSet(
                validator: validator, objectSize: range.total, contentType: head.headers.first(name: "Content-Type"),
                lastModified: head.headers.first(name: "Last-Modified").flatMap(HTTPDate.parse).map {
                    Date(timeIntervalSince1970: TimeInterval($0))
                },
                present: [])
            guard resolve() else { return nil }
            // The run was asked from the slice the range starts in (a suffix run: from before it), so the client's
            // first byte is in its answer, unless the version changed and the range moved with the size (a suffix
            // range): then start again from there.
            guard firstByte <= first, first <= range.last else {
                self.run = nil
                run.releaseAll()
                pump()
                return nil
            }
        }
        guard let set else { return nil }
        sendHead()
        return (set, !relaying)
    }

    /// Bytes of the run at `offset`: the part the client asked for goes out; the future is the client's pace.
    func runDelivered(_ piece: ByteBuffer, at offset: Int64) -> EventLoopFuture<Void> {
        responder.eventLoop.assertInEventLoop()
        guard !cancelled, !done else { return responder.eventLoop.makeSucceededVoidFuture() }
        let pieceEnd = offset + Int64(piece.readableBytes) - 1
        guard pieceEnd >= position, offset <= last, position <= last else { return responder.eventLoop.makeSucceededVoidFuture() }
        let from = max(offset, position)
        let to = min(pieceEnd, last)
        guard let part = piece.getSlice(at: piece.readerIndex + Int(from - offset), length: Int(to - from + 1)) else {
            return responder.eventLoop.makeSucceededVoidFuture()
        }
        position = to + 1
        let written = responder.write(part)
        if position > last { finish() }
        return written
    }

    /// Whether the response is over (sent whole, answered otherwise, or the client left).
    var isComplete: Bool { done || cancelled }

    /// A slice the run stored: later reads of this request (none: it moves forward) and of the set know it.
    func runStored(_ index: Int64) {
        set?.present.insert(index)
    }

    /// The run ended (the client may still need more: the next stored slice or run follows).
    func runFinished(_ run: SliceRun, _ result: Result<Void, OriginError>) {
        responder.eventLoop.assertInEventLoop()
        guard self.run === run else { return }
        self.run = nil
        guard !cancelled, !done else { return }
        switch result {
        case .success:
            pump()
        case .failure(let error):
            services.metrics.originFailed(code: error.code)
            done = true
            if headSent { responder.abort() } else { responder.send(error: error) }
        }
    }

    /// Answers the request the way it is answered without slices, or with `error`, when nothing was sent yet.
    private func stop(unlessFallback error: ProxyError?) {
        run = nil
        done = true
        if headSent {
            responder.abort()
        } else if let error {
            responder.send(error: error)
        } else {
            fallback()
        }
    }

    private func dropStoredSlices() {
        let (store, layout, key, logger) = (services.store, layout, key, services.logger)
        services.runBlocking { try store.removeSlices(of: key, layout: layout) }.whenFailure { error in
            logger.warning("cannot remove the slices of an older version", metadata: ["error": "\(error)"])
        }
    }

    // MARK: - Ranges before the size is known

    /// The first byte a `bytes=first-[last]` range asks for; nil for anything else (a suffix range, several
    /// ranges, not bytes), which needs the size first: served without slices.
    static func firstOffset(of header: String?) -> Int64? {
        bounds(of: header)?.first
    }

    static func lastOffset(of header: String?) -> Int64? {
        bounds(of: header)?.last
    }

    /// `N` of a suffix range `bytes=-N` (the last N bytes), N > 0; nil for anything else.
    static func suffixLength(of header: String?) -> Int64? {
        guard let header else { return nil }
        let compact = header.filter { $0 != " " && $0 != "\t" }
        guard compact.lowercased().hasPrefix("bytes=-") else { return nil }
        let digits = compact.dropFirst(7)
        guard !digits.isEmpty, digits.count <= 18, digits.allSatisfy(\.isASCIIDigit), let length = Int64(digits), length > 0 else {
            return nil
        }
        return length
    }

    private static func bounds(of header: String?) -> (first: Int64, last: Int64?)? {
        guard let header else { return nil }
        let compact = header.filter { $0 != " " && $0 != "\t" }
        guard compact.lowercased().hasPrefix("bytes="), !compact.contains(",") else { return nil }
        let parts = compact.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[0].count <= 18, parts[0].allSatisfy(\.isASCIIDigit), let first = Int64(parts[0])
        else {
            return nil
        }
        if parts[1].isEmpty { return (first, nil) }
        guard parts[1].count <= 18, parts[1].allSatisfy(\.isASCIIDigit), let last = Int64(parts[1]), last >= first else { return nil }
        return (first, last)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
