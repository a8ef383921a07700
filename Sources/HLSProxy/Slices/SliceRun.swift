import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOConcurrencyHelpers
import NIOCore

/// One origin `Range` request for a run of consecutive slices of a large object (``SliceStitcher``): the body is
/// cut at slice boundaries, each slice written to a cache writer of its own (temp file, then fsync, rename and index
/// row, like any object) on the thread pool, and handed to the stitcher for the client. The next origin read waits for
/// both, so a run holds one chunk in memory. A slice is committed only when all its bytes arrived, with the validator
/// and size the origin answered with; a partial one is discarded.
///
/// A suffix run (`bytes=-N` with nothing stored, the size unknown) asks the origin for the last `N + sliceSize - 1`
/// bytes: its answer names the size, and starts at or before the first byte of the slice holding the client's first
/// byte, so every slice the range covers is stored whole (nginx's slice module fetches slice 0 to learn the size
/// instead: a slice more, at the other end of the object).
///
/// Runs the decisions of its ``SliceRunStateMachine`` (the range asked for, where the answer starts, the cut at slice
/// boundaries, the outcome). Streams on the client's event loop: every callback runs there, and the run's state is
/// bound to it (``NIOLoopBoundBox``); the disk jobs on the thread pool share only `writer` and `storing`, locked.
final class SliceRun: OriginStreamHandler {
    private let stitcher: SliceStitcher
    private let services: ProxyServices
    private let layout: SliceLayout
    private let key: CacheKey
    private let url: OriginURL
    private let eventLoop: any EventLoop

    /// What the event loop alone touches.
    private struct Loop {
        var machine: SliceRunStateMachine
        var task: OriginTask?
        /// The version the slices are stored as (nil until the head was accepted).
        var set: SliceSet?
        var contentType: String?
        var lastModified: Date?
        /// Disk work, in order: each job waits for the one before.
        var disk: EventLoopFuture<Void>
        /// The last client write.
        var client: EventLoopFuture<Void>
        /// The slices of the run whose followers (``SliceFlights``) were told already.
        var released = Set<Int64>()
        /// What requests following this run's slices see (``SliceFlight``), by slice index: the stitcher claimed them.
        var flights: [Int64: SliceFlight] = [:]
    }

    private let loop: NIOLoopBoundBox<Loop>
    /// The slice being written (used only by the disk jobs, one at a time).
    private let writer = NIOLockedValueBox<(index: Int64, writer: CacheWriter)?>(nil)
    /// A write failed (full disk, …): the rest is relayed, not stored.
    private let storing = NIOLockedValueBox(true)

    /// A run of the slices `indices`, or — `indices` nil — a suffix run for the last `suffix` bytes.
    init(
        stitcher: SliceStitcher, services: ProxyServices, layout: SliceLayout, key: CacheKey, url: OriginURL, indices: ClosedRange<Int64>?,
        suffix: Int64? = nil, eventLoop: any EventLoop
    ) {
        self.stitcher = stitcher
        self.services = services
        self.layout = layout
        self.key = key
        self.url = url
        self.eventLoop = eventLoop
        loop = NIOLoopBoundBox.makeBoxSendingValue(
            Loop(
                machine: SliceRunStateMachine(layout: layout, indices: indices, suffix: suffix),
                disk: eventLoop.makeSucceededVoidFuture(), client: eventLoop.makeSucceededVoidFuture()),
            eventLoop: eventLoop)
    }

    private var indices: ClosedRange<Int64>? { loop.value.machine.indices }

    func start() {
        if let indices {
            for index in indices { loop.value.flights[index] = services.sliceFlights.flight(layout.key(of: key, slice: index).value) }
        }
        loop.value.task = services.origin.stream(url, headers: [("Range", loop.value.machine.rangeHeader)], on: eventLoop, handler: self)
    }

    func cancel() {
        loop.value.machine.stop()
        loop.value.task?.cancel()
    }

    // MARK: - OriginStreamHandler

    func didReceiveHead(_ head: OriginResponseHead) {
        guard !loop.value.machine.isStopped else { return }
        let firstByte = loop.value.machine.answered(head)
        guard let (accepted, store) = stitcher.runAnswered(self, head: head, firstByte: firstByte) else {
            cancel()
            return
        }
        loop.value.set = accepted
        if store {
            for flight in loop.value.flights.values { flight.accepted(accepted) }
        } else {
            storing.withLockedValue { $0 = false }
            releaseAll()
        }
        loop.value.contentType = head.headers.first(name: "Content-Type")
        loop.value.lastModified = accepted.lastModified
        loop.value.machine.accepted(objectSize: accepted.objectSize, contentRange: head.headers.first(name: "Content-Range"))
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        let pieces: [SliceRunStateMachine.Piece]
        switch loop.value.machine.received(buffer) {
        case .success(let cut): pieces = cut
        case .failure(let error): return eventLoop.makeFailedFuture(error)
        }
        for piece in pieces {
            store(piece)
            loop.value.client = stitcher.runDelivered(piece.bytes, at: piece.offset)
        }
        // A relayed run (nothing stored) is over once its client has what it asked for.
        if !storing.withLockedValue({ $0 }), stitcher.isComplete { loop.value.machine.stop() }
        return loop.value.client.and(loop.value.disk).map { _ in }
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        let outcome = loop.value.machine.finished(result)
        // The last slice's commit (or the abort of a partial one) comes first: a next run must find it stored.
        let writer = self.writer
        let settled = loop.value.disk.always { _ in
            writer.withLockedValue { current in
                current?.writer.abort()
                current = nil
            }
        }
        settled.whenComplete { [self] _ in
            releaseAll()
            stitcher.runFinished(self, outcome)
        }
    }

    /// Tells the requests waiting for this run's slices (``SliceFlights``) that it stored `index`, or, with `stored`
    /// false, that it will not: they fetch it themselves.
    private func release(_ index: Int64, stored: Bool) {
        guard let indices, indices.contains(index), loop.value.released.insert(index).inserted else { return }
        services.sliceFlights.release(layout.key(of: key, slice: index).value, stored: stored)
    }

    /// Every slice of the run not released yet is given up.
    func releaseAll() {
        guard let indices else { return }
        for index in indices { release(index, stored: false) }
    }

    // MARK: - Disk

    /// Queues `piece` for its slice's cache writer: a writer is made at the slice's first byte, and the slice committed
    /// at its last (a run starts on a slice boundary; one that ends early leaves a partial slice, aborted).
    private func store(_ piece: SliceRunStateMachine.Piece) {
        guard storing.withLockedValue({ $0 }), let set = loop.value.set else { return }
        let (index, startsSlice, endsSlice, bytes) = (piece.slice, piece.startsSlice, piece.endsSlice, piece.bytes)
        let sliceKey = layout.key(of: key, slice: index)
        let range = layout.bytes(of: index, total: set.objectSize)
        let metadata = ObjectSlice(set: layout.setID(of: key), index: index, objectSize: set.objectSize)
        let (store, writer, storing, contentType, lastModified) = (
            services.store, writer, storing, loop.value.contentType, loop.value.lastModified
        )
        // Requests following this slice are sent what is written as it is written.
        let flight = loop.value.flights[index]
        let job: @Sendable () throws -> Bool = {
            guard storing.withLockedValue({ $0 }) else { return false }
            do {
                let current: CacheWriter
                if startsSlice {
                    writer.withLockedValue { $0?.writer.abort() }
                    current = try store.makeWriter(for: sliceKey, expectedLength: range.last - range.first + 1)
                    writer.withLockedValue { $0 = (index, current) }
                    if let flight, let descriptor = current.openReader() { flight.began(GrowingFile(descriptor: descriptor)) }
                } else {
                    guard let open = writer.withLockedValue({ $0 }), open.index == index else { return false }
                    current = open.writer
                }
                try bytes.withUnsafeReadableBytes { try current.write($0) }
                flight?.wrote(current.bytesWritten)
                guard endsSlice else { return false }
                writer.withLockedValue { $0 = nil }
                _ = try current.finish(
                    contentType: contentType, kind: .segment, etag: set.validator, lastModified: lastModified, slice: metadata)
                return true
            } catch {
                storing.withLockedValue { $0 = false }
                writer.withLockedValue { current in
                    current?.writer.abort()
                    current = nil
                }
                throw error
            }
        }
        let (threadPool, eventLoop, failures, label) = (services.threadPool, eventLoop, services.cacheWriteFailures, url.redacted)
        let stitcher = self.stitcher
        loop.value.disk = loop.value.disk.flatMap {
            threadPool.runIfActive(eventLoop: eventLoop, job).map { [self] committed in
                if committed {
                    stitcher.runStored(index)
                    release(index, stored: true)
                }
            }.recover { [self] error in
                failures.record(error, label: label)
                // Nothing more is stored: requests following the rest fetch it themselves.
                releaseAll()
            }
        }
    }
}
