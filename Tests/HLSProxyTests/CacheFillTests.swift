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
                for case .opened(let file) in events { return file }
                return nil
            }
        }
        var stopped: Bool { events.withLockedValue { $0.contains { if case .stopped = $0 { true } else { false } } } }
    }

    static func store() throws -> (CacheStore, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fill-\(UUID().uuidString)")
        return (try CacheStore.open(directory: directory.path, maxBytes: 1 << 30, freeDiskCushion: 0), directory)
    }

    static func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
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
        try await Self.waitUntil { recorder.written == 4 }
        let file = try #require(recorder.file)
        #expect(try Self.read(file, count: 8) == [1, 2, 3, 4])
        fill.append(ByteBuffer(bytes: [5, 6, 7, 8]))
        let stored = NIOLockedValueBox<CachedObject?>(nil)
        let done = NIOLockedValueBox(false)
        fill.commit(contentType: "video/mp2t", kind: .segment, lastModified: nil) { object in
            stored.withLockedValue { $0 = object }
            done.withLockedValue { $0 = true }
        }
        try await Self.waitUntil { done.withLockedValue { $0 } }
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
        try await Self.waitUntil { recorder.written == 3 }
        fill.abort()
        #expect(recorder.stopped)
        let file = try #require(recorder.file)
        #expect(try Self.read(file, count: 3) == [9, 9, 9], "unlinked, still readable through the descriptor")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.appendingPathComponent("tmp").path).isEmpty)
        #expect(store.lookup(CacheKey(try OriginURL("http://origin.test/b.ts"))) == nil)
    }
}
