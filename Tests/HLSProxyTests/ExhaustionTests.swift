import Foundation
import HLSCacheCore
import HLSCacheStore
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import HLSProxy

/// The smaller ways one bad moment used to stop or flood the service: a cache that cannot store (one warning, then a
/// count), a free-disk cushion larger than the file system (not ready), and a very large playlist.
@Suite struct ExhaustionTests {
    /// Every miss fails to store alike when the cache is full: the log says so once, the metric counts each.
    @Test func aFullCacheLogsOneWarningAndCountsEveryMiss() async throws {
        let capture = KeyLeakLogCapture()
        var logger = Logger(label: "hlscache-test") { _ in capture }
        logger.logLevel = .info
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory, configure: { $0.maxCacheBytes = 1000 }, logger: logger)
        defer { Task { await harness.shutdown() } }
        let misses = 12
        for index in 0..<misses {
            harness.origin.setBody([UInt8](repeating: UInt8(index), count: 4000), contentType: "video/mp2t", for: "/full\(index).ts")
            let response = try await harness.get(harness.url("/full\(index).ts"))
            #expect(response.status == 200 && response.body.count == 4000, "relayed whole")
            try await harness.waitForIdle()
        }
        let warnings = capture.lines.filter { $0.hasPrefix("warning") && $0.contains("not caching") }
        #expect(warnings.count == 1, "\(warnings)")
        let metrics = try await harness.get("\(harness.base)/metrics").text
        #expect(metrics.contains("hlscache_cache_write_failures_total{reason=\"full\"} \(misses)"))
    }

    /// After the first line, at most one summary a minute, with the number of failures since the last line (the
    /// clock is the test's).
    @Test func laterFailuresAreSummedUpOnceAMinute() {
        let capture = KeyLeakLogCapture()
        var logger = Logger(label: "hlscache-test") { _ in capture }
        logger.logLevel = .info
        let start = ContinuousClock.now
        let clock = NIOLockedValueBox(start)
        let log = CacheWriteFailureLog(metrics: ProxyMetrics(), logger: logger, now: { clock.withLockedValue { $0 } })
        func warnings() -> [String] { capture.lines.filter { $0.hasPrefix("warning") } }
        log.record(CacheStoreError.cacheFull, label: "a.ts")
        #expect(warnings().count == 1)
        for second in 1...30 {
            clock.withLockedValue { $0 = start + .seconds(second) }
            log.record(CacheStoreError.cacheFull, label: "b\(second).ts")
        }
        #expect(warnings().count == 1, "\(warnings())")
        clock.withLockedValue { $0 = start + .seconds(61) }
        log.record(CacheStoreError.cacheFull, label: "c.ts")
        let lines = warnings()
        #expect(lines.count == 2)
        #expect(lines.last?.contains("31 more responses not cached") == true, "\(lines)")
        #expect(lines.last?.contains("the cache is full") == true)
        // A body that did not match its Content-Length is the origin's fault: not a cache warning.
        clock.withLockedValue { $0 = start + .seconds(200) }
        log.record(CacheStoreError.lengthMismatch, label: "d.ts")
        #expect(warnings().count == 2)
    }

    /// A free-disk cushion at least as large as the whole file system means nothing can ever be cached: not ready.
    @Test func aCushionLargerThanTheFileSystemIsNotReady() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cushion-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try CacheStore.open(directory: directory.path, maxBytes: 1 << 30, freeDiskCushion: 1 << 60)
        defer { store.close() }
        guard case .unavailable(let reason) = store.readiness() else {
            Issue.record("ready with a 1 EiB cushion: \(store.readiness())")
            return
        }
        #expect(reason.contains("cache.freeDiskCushion"), "\(reason)")
        let sane = try CacheStore.open(
            directory: directory.appendingPathComponent("sane").path, maxBytes: 1 << 30, freeDiskCushion: 0)
        defer { sane.close() }
        #expect(sane.readiness() == .ready)
    }
}
