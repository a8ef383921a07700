import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOCore
import NIOHTTP1

/// The decisions of one request answered from slices (``SliceStitcher``), without a channel, a disk or an origin:
/// the version served (``SliceSet``), the client's range and preconditions against it, the next byte to send, which
/// slice comes next (stored, or asked of the origin as a run), what each origin answer means (accepted, another
/// version, relayed without slices, served without slices), and how the response ends. Each event returns the effects
/// to run, in order; the stitcher does the I/O (store lookups, slice flights, writes, origin runs).
struct SliceStitcherStateMachine {
    /// Slices one origin request asks for at most: a request per slice would be a round trip per MiB.
    static let maxRunSlices: Int64 = 8

    /// What the machine needs of the client's request.
    struct Request: Equatable {
        var isHead = false
        /// The client's `Range` header; nil for the whole object.
        var range: String?
        var ifMatch: String?
        var ifUnmodifiedSince: String?
        var ifNoneMatch: String?
        var ifModifiedSince: String?
        var ifRange: String?
    }

    enum Effect: Equatable {
        /// The response head (the response's cache result with it).
        case beginStream(HTTPResponseStatus, HTTPHeaders, CacheResult)
        /// Bytes of an origin run, in order.
        case write(ByteBuffer)
        /// The response is complete.
        case end
        /// Close the connection: the client sees a short body, never mixed bytes.
        case abort
        /// Answer with an error (412, 416, the origin's status) before anything was sent.
        case sendError(ProxyError, HTTPHeaders)
        /// Answer a run's origin failure before anything was sent.
        case sendOriginError(OriginError)
        /// Count a run's origin failure.
        case countOriginFailure(String)
        /// `304 Not Modified` with these validators (a hit).
        case notModified(HTTPHeaders)
        /// Serve the request as if slices did not exist (only before anything was sent).
        case fallback
        /// Cancel the run in flight.
        case cancelRun
        /// The run in flight is no longer this request's: its claims are released, its outcome ignored.
        case releaseRun
        /// The run in flight is no longer this request's (it stops on its own).
        case forgetRun
        /// The stored slices are of an older version: logged, and removed from the store.
        case dropStoredSlices
        /// The origin's validator or size changed (logged).
        case logVersionChanged
        /// The object is relayed, not sliced: start the whole object's background fill.
        case startRelayFill
        /// Go on with the next slice (``next()``).
        case pump
    }

    /// How a request without a stored version starts.
    enum Start: Equatable {
        case fallback
        /// A suffix range: a suffix run tells the size.
        case suffixRun(Int64)
        /// Claim slice `index` (or follow the run fetching it), then as many of `more` as can be claimed in order.
        case run(index: Int64, more: [Int64])
    }

    /// What comes next.
    enum Step: Equatable {
        /// Nothing to do now: a run is in flight, or the response is over.
        case wait
        /// Slice `index` is stored: look it up and send `offset, length` of it (``sendingStored(_:)``), or report it
        /// gone (``storedSliceGone(_:)``).
        case stored(index: Int64)
        /// Slice `index` is missing: claim it (or follow the run fetching it), then as many of `more` as can be claimed
        /// in order, and start a run.
        case fetch(index: Int64, more: [Int64])
        /// Everything was sent: run `effects` (the head if not sent yet, the end).
        case finished([Effect])
    }

    /// A slice followed as another request's run writes it (``SliceFlight``), as the machine sees it.
    struct FlightProgress: Equatable {
        var set: SliceSet?
        var hasFile = false
        var written: Int64 = 0
        var outcome: Bool?
    }

    enum FollowStep: Equatable {
        /// The response is over.
        case stop
        /// The flight is over and nothing is known yet: start again from the stored version.
        case lookUpStoredSet
        /// Wait for the flight to change.
        case wait
        /// Run `effects`, then send `length` bytes from `offset` of the flight's file.
        case send(effects: [Effect], offset: Int64, length: Int64)
        /// Run `effects` (may hold ``Effect/pump``).
        case effects([Effect])
    }

    let layout: SliceLayout
    let request: Request
    /// The path's extension, for the content type when the origin sent none.
    let pathExtension: String?
    /// Whether a range miss of an object that is not sliced may be relayed (the stitcher has a background fill).
    let canRelay: Bool

    /// The version being served, once known.
    private(set) var set: SliceSet?
    /// The client's bytes (inclusive), once the size is known.
    private(set) var first: Int64 = 0
    private(set) var last: Int64 = -1
    /// The next byte to send.
    private(set) var position: Int64 = 0
    private(set) var partial = false
    private(set) var headSent = false
    private(set) var done = false
    private(set) var cancelled = false
    /// A run of this request is in flight.
    private(set) var running = false
    /// Every covering slice was stored when the request came (`X-Cache: HIT`).
    private(set) var wasStored = false
    /// Relaying an object that is not stored as slices (small, or without validators).
    private(set) var relaying = false

    init(layout: SliceLayout, request: Request, pathExtension: String?, canRelay: Bool) {
        self.layout = layout
        self.request = request
        self.pathExtension = pathExtension
        self.canRelay = canRelay
    }

    /// Whether the response is over (sent whole, answered otherwise, or the client left).
    var isComplete: Bool { done || cancelled }

    // MARK: - Starting

    /// Nothing stored: how the request starts.
    func start() -> Start {
        guard let startOffset = Self.firstOffset(of: request.range) else {
            if let suffix = Self.suffixLength(of: request.range) { return .suffixRun(suffix) }
            return .fallback
        }
        let index = layout.index(of: startOffset)
        guard let requestedLast = Self.lastOffset(of: request.range) else { return .run(index: index, more: []) }
        let lastIndex = min(layout.index(of: requestedLast), index + Self.maxRunSlices - 1)
        return .run(index: index, more: lastIndex > index ? Array(index + 1...lastIndex) : [])
    }

    /// The stored version (or one a flight announced) is served: the effects of answering the client's range and
    /// preconditions against it, and whether there is more to send (``next()``).
    mutating func adopt(_ stored: SliceSet) -> (effects: [Effect], proceed: Bool) {
        set = stored
        return resolve()
    }

    /// A run of this request was started.
    mutating func runStarted() {
        running = true
    }

    /// The client went away.
    mutating func clientGone() -> [Effect] {
        cancelled = true
        return running ? [.cancelRun] : []
    }

    // MARK: - Stored slices

    /// The next slice to send or fetch, or the end (the head if not sent yet, and the end of the response).
    mutating func next() -> Step {
        guard !cancelled, !done, !running, let set else { return .wait }
        guard position <= last else { return .finished(sendHead() + finish()) }
        let index = layout.index(of: position)
        if set.present.contains(index) { return .stored(index: index) }
        let lastIndex = min(layout.index(of: last), index + Self.maxRunSlices - 1)
        var more: [Int64] = []
        var candidate = index + 1
        while candidate <= lastIndex, !set.present.contains(candidate) {
            more.append(candidate)
            candidate += 1
        }
        return .fetch(index: index, more: more)
    }

    /// The bytes of stored slice `index` to send, `(offset in the slice, length)`, after `effects` (the head, first).
    mutating func sendingStored(_ index: Int64) -> (effects: [Effect], offset: Int64, length: Int64) {
        let slice = layout.bytes(of: index, total: set?.objectSize ?? 0)
        let end = min(last, slice.last)
        return (sendHead(), position - slice.first, end - position + 1)
    }

    /// Slice `index` was evicted (or replaced) since the set was read: fetched like any missing slice.
    mutating func storedSliceGone(_ index: Int64) {
        set?.present.remove(index)
    }

    /// The bytes up to `end` were sent (from a stored slice or a flight's file).
    mutating func sent(through end: Int64) {
        position = end + 1
    }

    /// A write failed: the client went away (or the descriptor could not be duplicated), nothing more to send.
    mutating func writeFailed() -> [Effect] {
        defer { done = true }
        return done ? [] : [.abort]
    }

    // MARK: - Following another request's run

    /// Slice `index`, fetched by another request's run, changed (or is looked at first).
    mutating func follow(_ progress: FlightProgress, index: Int64) -> FollowStep {
        guard !cancelled, !done else { return .stop }
        if let stored = progress.outcome {
            guard set != nil else { return .lookUpStoredSet }
            if stored { set?.present.insert(index) }
            return .effects([.pump])
        }
        guard let announced = progress.set else { return .wait }
        guard let set else {
            // Nothing known yet: the run's answer tells the size and the version.
            let (effects, proceed) = adopt(
                SliceSet(
                    validator: announced.validator, objectSize: announced.objectSize, contentType: announced.contentType,
                    lastModified: announced.lastModified, present: []))
            return .effects(proceed ? effects + [.pump] : effects)
        }
        guard announced.validator == set.validator, announced.objectSize == set.objectSize else { return .wait }
        let slice = layout.bytes(of: index, total: set.objectSize)
        let available = slice.first + progress.written
        guard position >= slice.first, position <= slice.last else { return .effects([.pump]) }
        guard progress.hasFile, available > position else { return .wait }
        let end = min(last, available - 1)
        return .send(effects: sendHead(), offset: position - slice.first, length: end - position + 1)
    }

    /// Bytes of slice `index` followed in a flight were sent: whether to follow the flight on (else ``next()``).
    func followsOn(_ index: Int64) -> Bool {
        guard let set else { return false }
        return position <= last && position <= layout.bytes(of: index, total: set.objectSize).last
    }

    // MARK: - Runs of this request

    /// A run's origin head: the effects, and the version the run's bytes belong to with whether to store them as
    /// slices, or nil when the run must stop (this request was answered otherwise).
    mutating func runAnswered(_ head: OriginResponseHead, firstByte: Int64, host: String)
        -> (effects: [Effect], accepted: (set: SliceSet, store: Bool)?)
    {
        guard !cancelled, !done else { return ([], nil) }
        let range = head.status == 206 ? head.headers.first(name: "Content-Range").flatMap(SliceResponse.parse) : nil
        guard let range, range.first == firstByte else {
            // The origin ignores Range (200), fails, or answers other bytes: served as without slices while nothing is
            // sent (with nothing stored, the path without slices relays even errors as it always did).
            let error =
                set == nil || head.status == 200 ? nil : ProxyError.originStatus(head.status, host: host, retryAfter: head.retryAfter)
            return (stop(unlessFallback: error), nil)
        }
        let answer = SliceResponse(
            contentRange: head.headers.first(name: "Content-Range"), strongETag: head.strongETag,
            lastModified: head.headers.first(name: "Last-Modified"))
        // Without a validator, versions cannot be told apart: such an object is relayed, never stored as slices.
        let sliceable = answer != nil && layout.isSliced(total: range.total)
        let validator = answer?.validator ?? head.strongETag ?? ""
        var effects: [Effect] = []
        if let known = set, known.validator != validator || known.objectSize != range.total || (!relaying && !sliceable) {
            effects.append(.logVersionChanged)
            if !relaying { effects.append(.dropStoredSlices) }
            if headSent {
                done = true
                return (effects + [.abort], nil)
            }
            set = nil
        }
        if set == nil {
            if !sliceable {
                // A small object (or one without validators) asked for by range: this answer is relayed, and the
                // whole object fetched into the cache meanwhile, as before slices. A playlist, or what may be one, and
                // a key-sized body take the path without slices, which checks them.
                let type = head.headers.first(name: "Content-Type")
                guard canRelay, !KeySizedBody.isKeySize(range.total), !MediaTypes.isPlaylist(contentType: type, pathExtension: nil),
                    firstByte > 0 || !MediaTypes.mightBePlaylist(contentType: type, pathExtension: pathExtension)
                else {
                    return (effects + stop(unlessFallback: nil), nil)
                }
                relaying = true
                effects.append(.startRelayFill)
            }
            let (resolved, proceed) = adopt(
                SliceSet(
                    validator: validator, objectSize: range.total, contentType: head.headers.first(name: "Content-Type"),
                    lastModified: head.headers.first(name: "Last-Modified").flatMap(HTTPDate.parse).map {
                        Date(timeIntervalSince1970: TimeInterval($0))
                    },
                    present: []))
            effects += resolved
            guard proceed else { return (effects, nil) }
            // The run was asked from the slice the range starts in (a suffix run: from before it), so the client's
            // first byte is in its answer, unless the version changed and the range moved with the size (a suffix
            // range): then start again from there.
            guard firstByte <= first, first <= range.last else {
                running = false
                return (effects + [.releaseRun, .pump], nil)
            }
        }
        guard let set else { return (effects, nil) }
        return (effects + sendHead(), (set, !relaying))
    }

    /// Bytes of the run at `offset`: the part the client asked for goes out (``Effect/write(_:)``), and the response
    /// ends after its last byte.
    mutating func runDelivered(_ piece: ByteBuffer, at offset: Int64) -> [Effect] {
        guard !cancelled, !done else { return [] }
        let pieceEnd = offset + Int64(piece.readableBytes) - 1
        guard pieceEnd >= position, offset <= last, position <= last else { return [] }
        let from = max(offset, position)
        let to = min(pieceEnd, last)
        guard let part = piece.getSlice(at: piece.readerIndex + Int(from - offset), length: Int(to - from + 1)) else { return [] }
        position = to + 1
        return [.write(part)] + (position > last ? finish() : [])
    }

    /// A slice the run stored: later reads of the set know it.
    mutating func runStored(_ index: Int64) {
        set?.present.insert(index)
    }

    /// This request's run ended (the client may still need more: the next stored slice or run follows).
    mutating func runFinished(_ result: Result<Void, OriginError>) -> [Effect] {
        running = false
        guard !cancelled, !done else { return [] }
        switch result {
        case .success:
            return [.pump]
        case .failure(let error):
            done = true
            return [.countOriginFailure(error.code), headSent ? .abort : .sendOriginError(error)]
        }
    }

    // MARK: - The response

    /// Resolves the client's range and preconditions against ``set``; `proceed` false when that answered the request
    /// (304, 412, 416) or there is nothing more to send (HEAD).
    private mutating func resolve() -> (effects: [Effect], proceed: Bool) {
        guard let set else { return ([], false) }
        let lastModified = set.lastModified.map { Int64($0.timeIntervalSince1970) } ?? Int64.max
        let etag = set.validator
        if ConditionalRequest.preconditionFails(
            ifMatch: request.ifMatch, ifUnmodifiedSince: request.ifUnmodifiedSince, etag: etag, lastModified: lastModified)
        {
            done = true
            return (
                [.sendError(ProxyError.preconditionFailed("the cached object does not satisfy If-Match or If-Unmodified-Since"), [:])],
                false
            )
        }
        if ConditionalRequest.isNotModified(
            ifNoneMatch: request.ifNoneMatch, ifModifiedSince: request.ifModifiedSince, etag: etag, lastModified: lastModified)
        {
            done = true
            return ([.notModified(Self.validatorHeaders(set))], false)
        }
        var range = RangeRequest.full
        if !request.isHead, ConditionalRequest.ifRangeAllowsPartial(request.ifRange, etag: etag, lastModified: lastModified) {
            range = RangeRequest(header: request.range, size: set.objectSize)
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
            return ([.sendError(ProxyError.rangeNotSatisfiable(size: set.objectSize), headers)], false)
        }
        position = first
        // A hit when every slice the response covers is stored (a HEAD too).
        wasStored = (layout.index(of: first)...layout.index(of: max(first, last))).allSatisfy { set.present.contains($0) }
        if request.isHead { return (sendHead() + finish(), false) }
        return ([], true)
    }

    static func validatorHeaders(_ set: SliceSet) -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: set.validator)
        if let lastModified = set.lastModified {
            headers.add(name: "Last-Modified", value: HTTPDate.format(Int64(lastModified.timeIntervalSince1970)))
        }
        return headers
    }

    /// The response head, once.
    private mutating func sendHead() -> [Effect] {
        guard !headSent, let set else { return [] }
        headSent = true
        var headers = set.validator.isEmpty ? HTTPHeaders() : Self.validatorHeaders(set)
        headers.add(name: "Content-Type", value: set.contentType ?? MediaTypes.choose(origin: nil, pathExtension: pathExtension))
        headers.add(name: "Accept-Ranges", value: "bytes")
        headers.add(name: "Content-Length", value: String(last - first + 1))
        if partial { headers.add(name: "Content-Range", value: "bytes \(first)-\(last)/\(set.objectSize)") }
        headers.add(name: "X-Cache", value: wasStored ? "HIT" : "MISS")
        let result: CacheResult = wasStored ? .hit : relaying ? .passthrough : .miss
        return [.beginStream(partial ? .partialContent : .ok, headers, result)]
    }

    private mutating func finish() -> [Effect] {
        guard !done else { return [] }
        done = true
        return [.end]
    }

    /// Answers the request the way it is answered without slices, or with `error`, when nothing was sent yet.
    private mutating func stop(unlessFallback error: ProxyError?) -> [Effect] {
        done = true
        running = false
        if headSent { return [.forgetRun, .abort] }
        if let error { return [.forgetRun, .sendError(error, [:])] }
        return [.forgetRun, .fallback]
    }
}

extension SliceStitcherStateMachine {
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
