import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
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
        // Each origin answer that could not be stored is counted once. That is one a miss, but on a starved machine
        // the origin was once asked twice for one of them (13 answers, one of 5–10 s, for 12 misses in a full run at
        // high load; not explained yet), so the count is checked against the origin's answers.
        let answers = harness.origin.requests(containing: "/full").count
        #expect(answers >= misses)
        let metrics = try await harness.get("\(harness.base)/metrics").text
        #expect(metrics.contains("hlscache_cache_write_failures_total{reason=\"full\"} \(answers)"), "\(answers) origin answers")
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

    /// An 8 MiB media playlist (220,000 segments) through `serve`, with read-ahead on (the default): the process keeps
    /// next to nothing of it. Before, it grew by 129 MB and kept it (the read-ahead index held every segment's URL
    /// and key; glibc kept the freed working copies). Memory, not time: the bound is generous (64 MiB) and far
    /// below what it was.
    @Test func anEightMiBPlaylistDoesNotStayInMemory() async throws {
        let origin = TestOrigin(root: FileManager.default.temporaryDirectory)
        try await origin.start()
        defer { Task { await origin.stop() } }
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n"
        var index = 0
        while text.utf8.count < 8 << 20 {
            text += "#EXTINF:4.000,\nsegments/seg\(String(index).leftPadded(to: 7)).ts\n"
            index += 1
        }
        origin.setBody(Array((text + "#EXT-X-ENDLIST\n").utf8), for: "/big.m3u8")
        let run = try await DescriptorLimitTests.Served.start(ulimit: nil)
        defer { run.stop() }
        func get(_ path: String) async throws -> String {
            try await RawHTTP.exchange(
                port: run.port, Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), readTimeout: 60
            ).response
        }
        _ = try await get("/healthz")
        let before = run.residentBytes
        let playlist = try await get("/http/127.0.0.1:\(origin.port)/big.m3u8")
        #expect(playlist.hasPrefix("HTTP/1.1 200"))
        #expect(playlist.count > 8 << 20)
        // The fetch is over (its cache entry written) before memory is read.
        try await waitUntil("the playlist's fetch to be over", interval: .milliseconds(50)) {
            try await get("/metrics").contains("hlscache_origin_fetches_in_flight 0")
        }
        let grown = run.residentBytes - before
        #expect(before > 0 && grown < 64 << 20, "RSS grew by \(grown >> 20) MiB (from \(before >> 20) MiB)")
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
