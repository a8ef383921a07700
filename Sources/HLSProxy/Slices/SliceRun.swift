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
/// Streams on the client's event loop: every callback runs there.
final class SliceRun: OriginStreamHandler, @unchecked Sendable {
    private let stitcher: SliceStitcher
    private let services: ProxyServices
    private let layout: SliceLayout
    private let key: CacheKey
    private let url: OriginURL
    /// The slices asked for (claimed in ``SliceFlights``); nil for a suffix run.
    private let indices: ClosedRange<Int64>?
    /// A suffix run: the client's suffix length.
    private let suffix: Int64?
    private let eventLoop: any EventLoop
    private var task: OriginTask?

    /// The version the slices are stored as (nil until the head was accepted).
    private var set: SliceSet?
    private var contentType: String?
    private var lastModified: Date?
    /// The next byte expected, and the last one the origin announced.
    private var offset: Int64 = 0
    private var lastByte: Int64 = -1
    private var stopped = false
    /// Disk work, in order: each job waits for the one before.
    private var disk: EventLoopFuture<Void>
    /// The last client write.
    private var client: EventLoopFuture<Void>
    /// The slice being written (used only by the disk jobs, one at a time).
    private let writer = NIOLockedValueBox<(index: Int64, writer: CacheWriter)?>(nil)
    /// A write failed (full disk, …): the rest is relayed, not stored.
    private let storing = NIOLockedValueBox(true)
    /// The slices of ``indices`` whose followers (``SliceFlights``) were told already.
    private var released = Set<Int64>()
    /// What requests following this run's slices see (``SliceFlight``), by slice index: the stitcher claimed them.
    private var flights: [Int64: SliceFlight] = [:]

    /// A run of the slices `indices`, or — `indices` nil — a suffix run for the last `suffix` bytes.
    init(
        stitcher: SliceStitcher, services: ProxyServices, layout: SliceLayout, key: CacheKey, url: OriginURL, indices: ClosedRange<Int64>?,
        suffix: Int64? = nil, eventLoop: any EventLoop
    ) {
        precondition((indices == nil) != (suffix == nil), "a run of slices, or of a suffix")
        self.stitcher = stitcher
        self.services = services
        self.layout = layout
        self.key = key
        self.url = url
        self.indices = indices
        self.suffix = suffix
        self.eventLoop = eventLoop
        firstByte = (indices?.lowerBound ?? 0) * layout.sliceSize
        disk = eventLoop.makeSucceededVoidFuture()
        client = eventLoop.makeSucceededVoidFuture()
    }

    /// The first byte asked for (a suffix run: the first the origin answered with).
    private var firstByte: Int64

    func start() {
        let range: String
        if let indices {
            for index in indices { flights[index] = services.sliceFlights.flight(layout.key(of: key, slice: index).value) }
            range = "bytes=\(firstByte)-\((indices.upperBound + 1) * layout.sliceSize - 1)"
        } else {
            range = "bytes=-\((suffix ?? 0) + layout.sliceSize - 1)"
        }
        task = services.origin.stream(url, headers: [("Range", range)], on: eventLoop, handler: self)
    }

    func cancel() {
        stopped = true
        task?.cancel()
    }

    // MARK: - OriginStreamHandler

    func didReceiveHead(_ head: OriginResponseHead) {
        guard !stopped else { return }
        if suffix != nil {
            // Wherever the origin's answer starts (-1: no usable Content-Range, which the stitcher turns down).
            firstByte = head.status == 206 ? head.headers.first(name: "Content-Range").flatMap(SliceResponse.parse)?.first ?? -1 : -1
        }
        guard let (accepted, store) = stitcher.runAnswered(self, head: head, firstByte: firstByte) else {
            stopped = true
            task?.cancel()
            return
        }
        set = accepted
        if store {
            for flight in flights.values { flight.accepted(accepted) }
        } else {
            storing.withLockedValue { $0 = false }
            releaseAll()
        }
        contentType = head.headers.first(name: "Content-Type")
        lastModified = accepted.lastModified
        offset = firstByte
        lastByte = SliceResponse.parse(head.headers.first(name: "Content-Range") ?? "")?.last ?? -1
    }

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        guard !stopped, let set else { return eventLoop.makeFailedFuture(OriginError.cancelled) }
        var buffer = buffer
        guard offset + Int64(buffer.readableBytes) - 1 <= lastByte else {
            return eventLoop.makeFailedFuture(OriginError.truncated)  // more than the Content-Range announced
        }
        while buffer.readableBytes > 0 {
            let index = layout.index(of: offset)
            let slice = layout.bytes(of: index, total: set.objectSize)
            let count = min(buffer.readableBytes, Int(slice.last - offset + 1))
            guard let piece = buffer.readSlice(length: count) else { break }
            store(piece, slice: index, startsSlice: offset == slice.first, endsSlice: offset + Int64(count) - 1 == slice.last)
            client = stitcher.runDelivered(piece, at: offset)
            offset += Int64(count)
        }
        // A relayed run (nothing stored) is over once its client has what it asked for.
        if !storing.withLockedValue({ $0 }), stitcher.isComplete { stopped = true }
        return client.and(disk).map { _ in }
    }

    func didFinish(_ result: Result<Void, OriginError>) {
        var result = result
        if case .success = result, offset != lastByte + 1 { result = .failure(.truncated) }
        if stopped, case .success = result { result = .failure(.cancelled) }
        // The last slice's commit (or the abort of a partial one) comes first: a next run must find it stored.
        let writer = self.writer
        let settled = disk.always { _ in
            writer.withLockedValue { current in
                current?.writer.abort()
                current = nil
            }
        }
        let outcome = result
        settled.whenComplete { [self] _ in
            releaseAll()
            stitcher.runFinished(self, outcome)
        }
    }

    /// Tells the requests waiting for this run's slices (``SliceFlights``) that it stored `index`, or, with `stored`
    /// false, that it will not: they fetch it themselves.
    private func release(_ index: Int64, stored: Bool) {
        guard let indices, indices.contains(index), released.insert(index).inserted else { return }
        services.sliceFlights.release(layout.key(of: key, slice: index).value, stored: stored)
    }

    /// Every slice of the run not released yet is given up.
    func releaseAll() {
        guard let indices else { return }
        for index in indices { release(index, stored: false) }
    }

    // MARK: - Disk

    /// Queues `piece` of slice `index` for its cache writer: a writer is made at the slice's first byte, and the slice
    /// committed at its last (a run starts on a slice boundary; one that ends early leaves a partial slice, aborted).
    private func store(_ piece: ByteBuffer, slice index: Int64, startsSlice: Bool, endsSlice: Bool) {
        guard storing.withLockedValue({ $0 }), let set else { return }
        let sliceKey = layout.key(of: key, slice: index)
        let bytes = layout.bytes(of: index, total: set.objectSize)
        let metadata = ObjectSlice(set: layout.setID(of: key), index: index, objectSize: set.objectSize)
        let (store, writer, storing, contentType, lastModified) = (services.store, writer, storing, contentType, lastModified)
        let stitcher = self.stitcher
        // Requests following this slice are sent what is written as it is written.
        let flight = flights[index]
        let job: @Sendable () throws -> Bool = {
            guard storing.withLockedValue({ $0 }) else { return false }
            do {
                let current: CacheWriter
                if startsSlice {
                    writer.withLockedValue { $0?.writer.abort() }
                    current = try store.makeWriter(for: sliceKey, expectedLength: bytes.last - bytes.first + 1)
                    writer.withLockedValue { $0 = (index, current) }
                    if let flight, let descriptor = current.openReader() { flight.began(GrowingFile(descriptor: descriptor)) }
                } else {
                    guard let open = writer.withLockedValue({ $0 }), open.index == index else { return false }
                    current = open.writer
                }
                try piece.withUnsafeReadableBytes { try current.write($0) }
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
        disk = disk.flatMap {
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
