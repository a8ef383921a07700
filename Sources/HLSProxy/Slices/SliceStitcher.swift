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
/// The decisions are ``SliceStitcherStateMachine``'s; this class runs its effects: store lookups, slice flights,
/// writes and origin runs. Bound to the client's event loop: it is made and started there by the resource service, its
/// runs (``SliceRun``) stream on that loop, the flights it follows wake it with `eventLoop.execute`, and its writes
/// complete there; what changes (the machine, the run in flight) is in a ``NIOLoopBoundBox`` of that loop.
final class SliceStitcher: Sendable {
    typealias Machine = SliceStitcherStateMachine

    private let services: ProxyServices
    private let layout: SliceLayout
    private let key: CacheKey
    private let url: OriginURL
    private let responder: Responder

    /// What only the request's event loop touches.
    private struct Loop {
        var machine: Machine
        /// This request's run in flight.
        var run: SliceRun?
        /// Serves the request as if slices did not exist (the origin ignores `Range`, or the object is too small to
        /// be sliced); only before anything was sent.
        let fallback: () -> Void
        /// For a range miss: starts the whole object's background fill when the object is relayed, not sliced.
        let onRelay: (() -> Void)?
    }

    private let loop: NIOLoopBoundBox<Loop>

    init(
        services: ProxyServices, layout: SliceLayout, key: CacheKey, url: OriginURL, request: ProxyRequest, responder: Responder,
        rangeHeader: String?, onRelay: (() -> Void)? = nil, fallback: @escaping () -> Void
    ) {
        self.services = services
        self.layout = layout
        self.key = key
        self.url = url
        self.responder = responder
        let machine = Machine(
            layout: layout,
            request: Machine.Request(
                isHead: request.isHead, range: rangeHeader, ifMatch: request.header("If-Match"),
                ifUnmodifiedSince: request.header("If-Unmodified-Since"), ifNoneMatch: request.header("If-None-Match"),
                ifModifiedSince: request.header("If-Modified-Since"), ifRange: request.header("If-Range")),
            pathExtension: url.pathExtension, canRelay: onRelay != nil)
        // Made on the request's loop, where it is started at once (SliceService).
        loop = NIOLoopBoundBox(Loop(machine: machine, fallback: fallback, onRelay: onRelay), eventLoop: responder.eventLoop)
    }

    /// Starts from the stored version `set`, or — nothing stored — by asking the origin for the slices the range
    /// starts in, which tells the size and the version.
    func start(with stored: SliceSet?) {
        responder.eventLoop.assertInEventLoop()
        responder.whenCancelled { [self] in
            execute(loop.value.machine.clientGone())
        }
        proceed(with: stored)
    }

    private func proceed(with stored: SliceSet?) {
        if let stored {
            let (effects, proceed) = loop.value.machine.adopt(stored)
            execute(effects)
            if proceed { pump() }
            return
        }
        switch loop.value.machine.start() {
        case .fallback:
            let fallback = loop.value.fallback
            fallback()
        case .suffixRun(let suffix):
            // The size is not known: the origin's answer to a suffix run tells it (SliceRun).
            startRun(indices: nil, suffix: suffix)
        case .run(let index, let more):
            // Another request fetching this slice: its answer tells the size and the version.
            guard claimOrFollow(index) else { return }
            startRun(index...claimed(after: index, more))
        }
    }

    /// Claims the slices of `more` in order while they can be claimed; the last index claimed.
    private func claimed(after index: Int64, _ more: [Int64]) -> Int64 {
        var end = index
        for next in more {
            guard services.sliceFlights.claim(layout.key(of: key, slice: next).value) else { break }
            end = next
        }
        return end
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
        let progress = flight.progress
        let seen = Machine.FlightProgress(
            set: progress.set, hasFile: progress.file != nil, written: progress.written, outcome: progress.outcome)
        switch loop.value.machine.follow(seen, index: index) {
        case .stop:
            return
        case .lookUpStoredSet:
            proceed(with: services.store.sliceSet(of: key, layout: layout))
        case .wait:
            waitForChange(of: flight, after: progress.changes, index: index)
        case .effects(let effects):
            execute(effects)
        case .send(let effects, let offset, let length):
            guard let file = progress.file else { return }
            execute(effects)
            let end = loop.value.machine.position + length - 1
            responder.writeFile(file, offset: offset, length: length).whenComplete { [self] result in
                switch result {
                case .success:
                    loop.value.machine.sent(through: end)
                    if loop.value.machine.followsOn(index) { follow(flight, index: index) } else { pump() }
                case .failure:
                    execute(loop.value.machine.writeFailed())
                }
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

    /// Runs the machine's effects in order.
    private func execute(_ effects: [Machine.Effect]) {
        for effect in effects {
            switch effect {
            case .beginStream(let status, let headers, let result):
                responder.cacheResult = result
                responder.beginStream(status: status, headers: headers)
            case .write(let bytes):
                _ = responder.write(bytes)
            case .end:
                responder.end()
            case .abort:
                responder.abort()
            case .sendError(let error, let headers):
                if headers.isEmpty { responder.send(error: error) } else { responder.send(error: error, extraHeaders: headers) }
            case .sendOriginError(let error):
                responder.send(error: error)
            case .countOriginFailure(let code):
                services.metrics.originFailed(code: code)
            case .notModified(let headers):
                responder.cacheResult = .hit
                responder.send(status: .notModified, headers: headers, body: .empty)
            case .fallback:
                // Copied out first: what the closure starts may call back into this stitcher.
                let fallback = loop.value.fallback
                fallback()
            case .cancelRun:
                let run = loop.value.run
                run?.cancel()
            case .releaseRun:
                let released = loop.value.run
                loop.value.run = nil
                released?.releaseAll()
            case .forgetRun:
                loop.value.run = nil
            case .dropStoredSlices:
                dropStoredSlices()
            case .logVersionChanged:
                services.logger.notice(
                    "slices of another version: the origin's validator or size changed", metadata: ["url": "\(url.redacted)"])
            case .startRelayFill:
                let onRelay = loop.value.onRelay
                onRelay?()
            case .pump:
                pump()
            }
        }
    }

    /// Sends the next stored slice, or asks the origin for the next run of missing ones; ends the response after
    /// the last byte.
    private func pump() {
        while true {
            switch loop.value.machine.next() {
            case .wait:
                return
            case .finished(let effects):
                execute(effects)
                return
            case .stored(let index):
                guard let set = loop.value.machine.set else { return }
                let slice = layout.bytes(of: index, total: set.objectSize)
                guard let (object, pin) = services.store.lookupAndPin(layout.key(of: key, slice: index)), set.contains(object),
                    object.size == slice.last - slice.first + 1, let file = Self.open(object)
                else {
                    // Evicted (or replaced) since the set was read: fetched like any missing slice.
                    loop.value.machine.storedSliceGone(index)
                    continue
                }
                let (effects, offset, length) = loop.value.machine.sendingStored(index)
                execute(effects)
                let end = loop.value.machine.position + length - 1
                responder.writeFile(file, offset: offset, length: length).whenComplete { [self] result in
                    pin.unpin()
                    switch result {
                    case .success:
                        loop.value.machine.sent(through: end)
                        pump()
                    case .failure:
                        execute(loop.value.machine.writeFailed())
                    }
                }
                return
            case .fetch(let index, let more):
                guard claimOrFollow(index) else { return }
                startRun(index...claimed(after: index, more))
                return
            }
        }
    }

    private func startRun(_ indices: ClosedRange<Int64>) {
        startRun(indices: indices, suffix: nil)
    }

    private func startRun(indices: ClosedRange<Int64>?, suffix: Int64?) {
        let run = SliceRun(
            stitcher: self, services: services, layout: layout, key: key, url: url, indices: indices, suffix: suffix,
            eventLoop: responder.eventLoop)
        loop.value.run = run
        loop.value.machine.runStarted()
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
        let (effects, accepted) = loop.value.machine.runAnswered(head, firstByte: firstByte, host: url.host)
        execute(effects)
        return accepted
    }

    /// Bytes of the run at `offset`: the part the client asked for goes out; the future is the client's pace.
    func runDelivered(_ piece: ByteBuffer, at offset: Int64) -> EventLoopFuture<Void> {
        responder.eventLoop.assertInEventLoop()
        var written = responder.eventLoop.makeSucceededVoidFuture()
        for effect in loop.value.machine.runDelivered(piece, at: offset) {
            if case .write(let bytes) = effect { written = responder.write(bytes) } else { execute([effect]) }
        }
        return written
    }

    /// Whether the response is over (sent whole, answered otherwise, or the client left).
    var isComplete: Bool { loop.value.machine.isComplete }

    /// A slice the run stored: later reads of this request (none: it moves forward) and of the set know it.
    func runStored(_ index: Int64) {
        loop.value.machine.runStored(index)
    }

    /// The run ended (the client may still need more: the next stored slice or run follows).
    func runFinished(_ run: SliceRun, _ result: Result<Void, OriginError>) {
        responder.eventLoop.assertInEventLoop()
        guard loop.value.run === run else { return }
        loop.value.run = nil
        execute(loop.value.machine.runFinished(result))
    }

    private func dropStoredSlices() {
        let (store, layout, key, logger) = (services.store, layout, key, services.logger)
        services.runBlocking { try store.removeSlices(of: key, layout: layout) }.whenFailure { error in
            logger.warning("cannot remove the slices of an older version", metadata: ["error": "\(error)"])
        }
    }
}
