import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import NIOCore
import Testing

/// Retries, error codes, the dry-run estimate and the cacheFull refusal of the download engine.
@Suite(.serialized) struct FetchFailureTests {
    private func start() async throws -> (TestOrigin, URL) {
        let dir = try await Streams.stream("fmp4", { try FFmpeg.makeFMP4(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        return (origin, dir)
    }

    @Test func transient503sAreRetriedWithBackoff() async throws {
        let (origin, _) = try await start()
        origin.setFault(.failFirst(times: 2, status: 503), for: "/seg001.m4s")
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8")
        #expect(item.state == .cached)
        let attempts = origin.requests(matching: "/seg001.m4s")
        #expect(attempts.count == 3, "two 503s then success")
        if attempts.count == 3 {
            #expect(attempts[2].time - attempts[1].time >= .milliseconds(10), "backoff between attempts")
        }
        #expect(try fetch.stored("/seg001.m4s") != nil)
        await fetch.shutdown()
        await origin.stop()
    }

    /// A rate-limited CDN (429 with Retry-After): the next attempt waits as long as it was asked, not the 20 ms backoff.
    @Test func aTooManyRequestsAnswerIsRetriedAfterTheTimeAskedFor() async throws {
        let (origin, _) = try await start()
        origin.setFault(.busyFirst(times: 1, seconds: 2), for: "/seg001.m4s")
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8")
        #expect(item.state == .cached)
        let attempts = origin.requests(matching: "/seg001.m4s")
        #expect(attempts.count == 2, "one 429, then the segment")
        if attempts.count == 2 {
            #expect(attempts[1].time - attempts[0].time >= .seconds(2), "Retry-After: 2 was not waited out")
        }
        await fetch.shutdown()
        await origin.stop()
    }

    /// A 503 on every attempt: the origin is unavailable, so the item waits in `idle` with the error as its reason
    /// and a next attempt (docs/design.md §5, "interrupted … resumes by itself"); `fetch --fail-fast` fails it instead.
    @Test func aResourceFailingThreeTimesLeavesTheItemWaitingOrFailsFast() async throws {
        let (origin, _) = try await start()
        origin.setFault(.status(503), for: "/seg002.m4s")
        // One resource at a time: a run stops at the failing segment, so a second run stores nothing new.
        let fetch = try DownloaderHarness(
            origin: origin,
            configure: {
                $0.idleRetryInterval = .seconds(30)
                $0.resourcesPerItem = 1
            })
        defer { Task { await fetch.shutdown() } }
        let before = Date()
        let item = try await fetch.fetch("/index.m3u8")
        #expect(item.state == .idle)
        #expect(item.errorCode == "http")
        #expect(item.errorMessage?.contains("503") == true, "\(item.errorMessage ?? "")")
        #expect(item.interruptions == 1 && item.interruptedAt != nil)
        let next = try #require(item.nextAttemptAt)
        #expect(next.timeIntervalSince(before) >= 29, "the first wait is idleRetryInterval")
        #expect(origin.requests(matching: "/seg002.m4s").count == 3, "3 attempts per resource")
        #expect(try fetch.stored("/seg002.m4s") == nil)
        #expect(fetch.events.contains(.stateChanged(id: item.id, state: .idle, errorCode: "http")))
        #expect(try fetch.items.runnable(limit: 10).isEmpty, "a scheduler leaves it alone until its next attempt")

        // Tried again, the origin still failing and nothing more stored: the wait doubles.
        let beforeSecond = Date()
        let second = try await fetch.downloader.run(item.id)
        #expect(second.state == .idle && second.interruptions == 2)
        // Compared to the millisecond: the first came back from SQLite, rounded.
        #expect(
            abs((second.interruptedAt ?? .distantPast).timeIntervalSince(item.interruptedAt ?? .distantFuture)) < 0.002,
            "waiting since the first interruption")
        // Judged against a moment taken before the run, so a starved test process cannot make it fail.
        #expect((second.nextAttemptAt?.timeIntervalSince(beforeSecond) ?? 0) >= 59)
        await fetch.shutdown()

        let failFast = try DownloaderHarness(origin: origin, configure: { $0.waitForOrigin = false })
        defer { Task { await failFast.shutdown() } }
        let failed = try await failFast.fetch("/index.m3u8")
        #expect(failed.state == .failed)
        #expect(failed.errorCode == "http")
        #expect(failed.nextAttemptAt == nil)
        #expect(failFast.events.contains(.stateChanged(id: failed.id, state: .failed, errorCode: "http")))
        await failFast.shutdown()
        await origin.stop()
    }

    @Test func truncatedBodiesAreNeverStored() async throws {
        let (origin, _) = try await start()
        origin.setFault(.truncate(bytes: 100), for: "/seg000.m4s")
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8")
        // A body cut short on every attempt is the origin failing, not its content: the item waits for it.
        #expect(item.state == .idle)
        #expect(item.errorCode == "network")
        #expect(try fetch.stored("/seg000.m4s") == nil)
        // Resources still in flight when the item failed are cancelled and their temp files removed as they wind
        // down (temp files are never served); wait for that, bounded, rather than racing it.
        let tmp = fetch.cacheDirectory.appendingPathComponent("tmp").path
        try await waitUntil(
            "the failed item's temp files to go (left: \((try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? []))"
        ) {
            try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty
        }
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func a404MasterIsNotFound() async throws {
        let (origin, _) = try await start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/missing.m3u8")
        #expect(item.state == .failed)
        #expect(item.errorCode == "notFound")
        #expect(origin.requests(matching: "/missing.m3u8").count == 1, "a 404 is not retried")
        await fetch.shutdown()
        await origin.stop()
    }

    /// Strict (`playlists.strict`), a malformed playlist is `corrupted` and not cached; the default tolerant reader
    /// reads it as players do (FetchTolerantPlaylistTests). What is no playlist is `corrupted` either way.
    @Test func aMalformedPlaylistIsCorruptedAndNotCached() async throws {
        let (origin, _) = try await start()
        origin.setBody(Array("#EXTM3U\n#EXTINF:abc,\nseg.ts\n".utf8), for: "/bad.m3u8")
        let fetch = try DownloaderHarness(origin: origin, configure: { $0.strictPlaylists = true })
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/bad.m3u8")
        #expect(item.state == .failed)
        #expect(item.errorCode == "corrupted")
        #expect(try fetch.stored("/bad.m3u8") == nil)
        origin.setBody(Array("<html>not a playlist</html>".utf8), for: "/html.m3u8")
        #expect(try await fetch.fetch("/html.m3u8").errorCode == "corrupted")
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func livePlaylistsAreRefused() async throws {
        let (origin, _) = try await start()
        origin.setBody(Array("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\nseg000.m4s\n".utf8), for: "/live.m3u8")
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/live.m3u8")
        #expect(item.state == .failed)
        #expect(item.errorCode == "unsupported")
        // Nothing of it is kept: a stored live playlist would be served by the proxy as a hit, frozen.
        #expect(try fetch.stored("/live.m3u8") == nil)
        origin.setBody(Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1000\nlive.m3u8\n".utf8), for: "/master.m3u8")
        let viaMaster = try await fetch.fetch("/master.m3u8")
        #expect(viaMaster.errorCode == "unsupported")
        #expect(try fetch.stored("/live.m3u8") == nil, "a live variant is not kept either")
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func dryRunEstimatesBandwidthTimesDurationAndStoresNothing() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = DownloadItem(id: "dry", url: fetch.url("/master.m3u8"), precacheSeconds: 4)
        let plan = try await fetch.downloader.makePlan(for: item, storing: false)
        let master = try String(contentsOf: dir.appendingPathComponent("master.m3u8"), encoding: .utf8)
        let bandwidths = master.split(separator: "\n").filter { $0.hasPrefix("#EXT-X-STREAM-INF") }.compactMap { line -> Double? in
            guard let range = line.range(of: "BANDWIDTH=") else { return nil }
            return Double(line[range.upperBound...].prefix { $0.isNumber })
        }
        #expect(bandwidths.count == 2)
        var expected = 0.0
        for (index, bandwidth) in bandwidths.enumerated() {
            let duration = plan.renditions.first { $0.selected.url.hasSuffix("/v\(index)/index.m3u8") }?.duration ?? 0
            #expect(duration > 3.9 && duration < 4.1)
            expected += bandwidth * duration / 8
        }
        #expect(abs(Double(plan.estimatedBytes ?? 0) - expected) <= 2)
        #expect(plan.renditions.count == 3 && plan.segmentCount == 6)
        #expect(try fetch.store.usage().count == 0, "a dry run stores nothing")
        #expect(origin.requests.allSatisfy { $0.path.hasSuffix(".m3u8") }, "only playlists are read")
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func anItemThatCannotFitIsRefusedWithCacheFull() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin2 = TestOrigin(root: dir)
        try await origin2.start()
        let fetch = try DownloaderHarness(origin: origin2, maxBytes: 64 * 1024)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/master.m3u8")
        #expect(item.state == .failed)
        #expect(item.errorCode == "cacheFull")
        #expect(origin2.requests.allSatisfy { $0.path.hasSuffix(".m3u8") }, "no segment was fetched")
        await fetch.shutdown()
        await origin2.stop()
    }

    /// Locked objects cannot be evicted, so they do not count as room: an item that fits the cap only if a locked
    /// item's files went is refused; the same bytes unlocked would be evicted and the item fits.
    /// A media playlist has no BANDWIDTH, so nothing can refuse it up front; when it is bigger than the cache, its own
    /// later writes evict its first segments. The item must not end `cached` with objects missing.
    @Test func anItemWhoseOwnWritesEvictedItsFirstSegmentsIsNotCached() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir.appendingPathComponent("v0").path).filter {
            $0.hasSuffix(".ts")
        }
        let sizes = try segments.map {
            try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("v0/\($0)").path)[.size] as! Int64
        }
        // Room for three of the four segments: the last ones written must evict the first.
        let fetch = try DownloaderHarness(origin: origin, maxBytes: sizes.max()! * 3) { $0.resourcesPerItem = 1 }
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/v0/index.m3u8", id: "too-big")
        #expect(item.state == .failed)
        #expect(item.errorCode == "cacheFull")
        // Either its own later writes evicted the first segments (the usual course), or — when the last write came
        // while the segment before it was still pinned by its just-finished writer — the last one found no room.
        // Both end the same way: failed, never `cached` with objects missing.
        let message = item.errorMessage ?? ""
        #expect(message.contains("were evicted before the download ended") || message.contains("do not fit under the cap"), "\(message)")
    }

    @Test func lockedBytesDoNotCountAsRoom() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let probe = try DownloaderHarness(origin: origin)
        let estimate = try #require(
            try await probe.downloader.makePlan(for: DownloadItem(id: "p", url: probe.url("/master.m3u8")), storing: false).estimatedBytes)
        await probe.shutdown()

        for locked in [true, false] {
            let fetch = try DownloaderHarness(origin: origin, maxBytes: estimate * 3 / 2)
            let filler = try fetch.store.makeWriter(for: CacheKey(try OriginURL("http://127.0.0.1:1/filler.bin")), expectedLength: estimate)
            try filler.write([UInt8](repeating: 7, count: Int(estimate)))
            _ = try filler.finish(contentType: "application/octet-stream", kind: .segment, locked: locked)
            let item = try await fetch.fetch("/master.m3u8", id: "after-\(locked)")
            if locked {
                #expect(item.state == .failed)
                #expect(item.errorCode == "cacheFull")
                #expect(item.errorMessage?.contains("locked") == true, "\(item.errorMessage ?? "")")
            } else {
                #expect(item.state == .cached, "\(item.errorCode ?? "") \(item.errorMessage ?? "") estimate \(estimate)")
            }
            await fetch.shutdown()
        }
        await origin.stop()
    }
}
