import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import HLSProxy

/// ``CacheFill`` on a real store, off any event loop: what it reports, and what a reader of the growing file sees.
@Suite struct CacheFillTests {
    final class Recorder: Sendable {
        let events = NIOLockedValueBox<[CacheFill.Event]>([])
        var written: Int64 {
            events.withLockedValue { events in
                events.reduce(0) { total, event in
                    if case .written(let bytes) = event { return bytes }
                    return total
                }
            }
        }
        var file: GrowingFile? {
            events.withLockedValue { events in
                for case .opened(let file) in events { return file as? GrowingFile }
                return nil
            }
        }
        var stopped: Bool { events.withLockedValue { $0.contains { if case .stopped = $0 { true } else { false } } } }
    }

    static func store() throws -> (CacheStore, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fill-\(UUID().uuidString)")
        return (try CacheStore.open(directory: directory.path, maxBytes: 1 << 30, freeDiskCushion: 0), directory)
    }

    /// Waits for `condition` (a generous bound, not a measurement) and fails the test there if it never holds.
    static func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
        try await HLSTestSupport.waitUntil(what, interval: .milliseconds(10)) { condition() }
    }

    static func read(_ file: GrowingFile, count: Int) throws -> [UInt8] {
        let handle = try #require(file.handle())
        defer { try? handle.close() }
        return try handle.withUnsafeFileDescriptor { descriptor in
            var bytes = [UInt8](repeating: 0, count: count)
            let n = pread(descriptor, &bytes, count, 0)
            return Array(bytes.prefix(max(0, n)))
        }
    }

    /// Chunks are held until ``CacheFill/coalesceBytes`` are pending, then written together (one writev: large page
    /// cache folios); ``CacheFill/flush()`` writes what is pending at once, and the commit writes the rest.
    @Test func chunksAreWrittenACoalescedBatchAtATime() async throws {
        let (store, directory) = try Self.store()
        defer {
            store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let recorder = Recorder()
        let key = CacheKey(try OriginURL("http://origin.test/c.ts"))
        let fill = CacheFill(
            store: store, key: key, expectedLength: 140, threadPool: NIOThreadPool.singleton, logger: Logger(label: "test"), label: "c.ts",
            coalesceBytes: 100, events: { event in recorder.events.withLockedValue { $0.append(event) } })
        try await Self.waitUntil("the temp file opened") { recorder.file != nil }
        let file = try #require(recorder.file)
        let body = (0..<140).map { UInt8($0) }
        for part in 0..<3 { fill.append(ByteBuffer(bytes: body[(part * 30)..<(part * 30 + 30)])) }
        // Under the batch size no write is even scheduled: the file is empty, deterministically.
        #expect(try Self.read(file, count: 140).isEmpty)
        #expect(recorder.written == 0)
        fill.append(ByteBuffer(bytes: body[90..<120]))
        try await Self.waitUntil("120 bytes written") { recorder.written == 120 }
        #expect(recorder.written == 120, "the batch of four chunks")
        #expect(try Self.read(file, count: 140) == Array(body[0..<120]))
        fill.append(ByteBuffer(bytes: body[120..<130]))
        fill.flush()
        try await Self.waitUntil("130 bytes written") { recorder.written == 130 }
        #expect(recorder.written == 130, "flushed under the batch size")
        fill.append(ByteBuffer(bytes: body[130..<140]))
        let stored = NIOLockedValueBox<CachedObject?>(nil)
        let done = NIOLockedValueBox(false)
        fill.commit(contentType: "video/mp2t", kind: .segment, lastModified: nil) { object in
            stored.withLockedValue { $0 = object }
            done.withLockedValue { $0 = true }
        }
        try await Self.waitUntil("the commit") { done.withLockedValue { $0 } }
        #expect(stored.withLockedValue { $0?.size } == 140)
        #expect(try Self.read(file, count: 140) == body)
    }

    /// One writev of many parts writes them in order, and is held to the announced length like single writes.
    @Test func aWriteOfManyPartsKeepsTheirOrderAndTheAnnouncedLength() throws {
        let (store, directory) = try Self.store()
        defer {
            store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let parts: [[UInt8]] = (0..<200).map { index in [UInt8](repeating: UInt8(index), count: 1 + index % 7) }
        let total = parts.reduce(0) { $0 + $1.count }
        let writer = try store.makeWriter(for: CacheKey(try OriginURL("http://origin.test/v.ts")), expectedLength: Int64(total))
        try Self.withPointers(parts[...]) { try writer.write(parts: $0) }
        let object = try writer.finish(contentType: nil, kind: .segment)
        #expect(try Data(contentsOf: URL(fileURLWithPath: object.path)) == Data(parts.flatMap { $0 }))

        let short = try store.makeWriter(for: CacheKey(try OriginURL("http://origin.test/w.ts")), expectedLength: 5)
        #expect(throws: CacheStoreError.self) { try Self.withPointers([[1, 2, 3], [4, 5, 6]]) { try short.write(parts: $0) } }
    }

    static func withPointers(
        _ parts: ArraySlice<[UInt8]>, _ pointers: [UnsafeRawBufferPointer] = [], _ body: ([UnsafeRawBufferPointer]) throws -> Void
    ) throws {
        guard let first = parts.first else { return try body(pointers) }
        try first.withUnsafeBytes { try withPointers(parts.dropFirst(), pointers + [$0], body) }
    }

    @Test func writtenBytesAreReadableWhileTheFileGrowsAndAfterTheCommit() async throws {
        let (store, directory) = try Self.store()
        defer {
            store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let recorder = Recorder()
        let key = CacheKey(try OriginURL("http://origin.test/a.ts"))
        let fill = CacheFill(
            store: store, key: key, expectedLength: 8, threadPool: NIOThreadPool.singleton, logger: Logger(label: "test"), label: "a.ts",
            events: { event in recorder.events.withLockedValue { $0.append(event) } })
        fill.append(ByteBuffer(bytes: [1, 2, 3, 4]))
        try await Self.waitUntil("4 bytes written") { recorder.written == 4 }
        let file = try #require(recorder.file)
        #expect(try Self.read(file, count: 8) == [1, 2, 3, 4])
        fill.append(ByteBuffer(bytes: [5, 6, 7, 8]))
        let stored = NIOLockedValueBox<CachedObject?>(nil)
        let done = NIOLockedValueBox(false)
        fill.commit(contentType: "video/mp2t", kind: .segment, lastModified: nil) { object in
            stored.withLockedValue { $0 = object }
            done.withLockedValue { $0 = true }
        }
        try await Self.waitUntil("the commit") { done.withLockedValue { $0 } }
        #expect(stored.withLockedValue { $0?.size } == 8)
        #expect(try Self.read(file, count: 8) == [1, 2, 3, 4, 5, 6, 7, 8], "the descriptor follows the file into the cache")
        #expect(!recorder.stopped)
    }

    @Test func anAbortReportsTheStopAndLeavesWhatWasWrittenReadable() async throws {
        let (store, directory) = try Self.store()
        defer {
            store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let recorder = Recorder()
        let fill = CacheFill(
            store: store, key: CacheKey(try OriginURL("http://origin.test/b.ts")), expectedLength: nil, threadPool: NIOThreadPool.singleton,
            logger: Logger(label: "test"), label: "b.ts", events: { event in recorder.events.withLockedValue { $0.append(event) } })
        fill.append(ByteBuffer(bytes: [9, 9, 9]))
        try await Self.waitUntil("3 bytes written") { recorder.written == 3 }
        fill.abort()
        #expect(recorder.stopped)
        let file = try #require(recorder.file)
        #expect(try Self.read(file, count: 3) == [9, 9, 9], "unlinked, still readable through the descriptor")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("tmp").path).isEmpty)
        #expect(store.lookup(CacheKey(try OriginURL("http://origin.test/b.ts"))) == nil)
    }

    /// Written as the chunks come (0) or in batches of 20 bytes cut across slice boundaries: the same slices.
    @Test(arguments: [0, 20])
    func aSlicedFillCommitsEachSliceAsItsLastByteIsWrittenAndKeepsThemWhenStopped(coalesce: Int) async throws {
        let (store, directory) = try Self.store()
        defer {
            store.close()
            try? FileManager.default.removeItem(at: directory)
        }
        let layout = SliceLayout(sliceSize: 4)
        let key = CacheKey(try OriginURL("http://origin.test/big.mp4"))
        let recorder = Recorder()
        // 50 bytes in slices of 4: 12 whole slices and a last one of 2.
        let fill = CacheFill(
            store: store, key: key, expectedLength: 50,
            slicing: CacheFill.Slicing(layout: layout, validator: "\"v1\"", objectSize: 50, contentType: "video/mp4", lastModified: nil),
            threadPool: NIOThreadPool.singleton, logger: Logger(label: "test"), label: "big.mp4", coalesceBytes: coalesce,
            events: { event in recorder.events.withLockedValue { $0.append(event) } })
        let body = (0..<50).map { UInt8($0) }
        // Chunks that straddle slice boundaries.
        fill.append(ByteBuffer(bytes: body[0..<7]))
        fill.append(ByteBuffer(bytes: body[7..<21]))
        try await Self.waitUntil("21 bytes written") { recorder.written == 21 }
        #expect(recorder.events.withLockedValue { $0.contains { if case .opened(let file) = $0 { file is SlicedFile } else { false } } })
        let early = try #require(store.sliceSet(of: key, layout: layout))
        #expect(early.present == [0, 1, 2, 3, 4], "each whole slice committed at once")
        #expect(early.validator == "\"v1\"" && early.objectSize == 50)
        #expect(store.lookup(key) == nil, "never stored whole")
        fill.append(ByteBuffer(bytes: body[21..<50]))
        let done = NIOLockedValueBox(false)
        fill.commit(contentType: "video/mp4", kind: .segment, lastModified: nil) { _ in done.withLockedValue { $0 = true } }
        try await Self.waitUntil("the commit") { done.withLockedValue { $0 } }
        let set = try #require(store.sliceSet(of: key, layout: layout))
        #expect(set.present == Set(0..<13))
        var stitched: [UInt8] = []
        for index in Int64(0)..<13 {
            let object = try #require(store.lookup(layout.key(of: key, slice: index)))
            #expect(object.etag == "\"v1\"")
            stitched += try [UInt8](Data(contentsOf: URL(fileURLWithPath: object.path)))
        }
        #expect(stitched == body)
        #expect(store.lookup(layout.key(of: key, slice: 12))?.size == 2, "the last slice is short")

        // A fill that stops mid-way keeps its whole slices, never the partial one.
        let other = CacheKey(try OriginURL("http://origin.test/other.mp4"))
        let stopped = CacheFill(
            store: store, key: other, expectedLength: 50,
            slicing: CacheFill.Slicing(layout: layout, validator: "\"v2\"", objectSize: 50, contentType: nil, lastModified: nil),
            threadPool: NIOThreadPool.singleton, logger: Logger(label: "test"), label: "other.mp4",
            events: { event in recorder.events.withLockedValue { $0.append(event) } })
        stopped.append(ByteBuffer(bytes: body[0..<10]))
        try await Self.waitUntil("two slices stored") { store.sliceSet(of: other, layout: layout)?.present.count == 2 }
        stopped.abort()
        #expect(store.sliceSet(of: other, layout: layout)?.present == [0, 1])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("tmp").path).isEmpty)
    }
}
