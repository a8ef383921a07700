import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import NIOCore
import NIOPosix
import Testing

/// Pause/resume, rm, lock against eviction, and expiry of items.
@Suite(.serialized) struct FetchLifecycleTests {
    private func start() async throws -> (TestOrigin, URL) {
        let dir = try await Streams.stream("fmp4", { try FFmpeg.makeFMP4(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        return (origin, dir)
    }

    @Test func pauseStopsTheDownloadAndResumeFinishesWithoutRefetching() async throws {
        let (origin, _) = try await start()
        origin.setFault(.slow(chunk: 4096, delay: .milliseconds(20)), for: "/seg000.m4s")
        // The second segment stalls until the pause cancels it: the pause always interrupts a write and finds
        // segments left, however slow the machine (a slowed but finite one could all be stored before the pause).
        origin.setFault(.stallAfter(bytes: 4096), for: "/seg001.m4s")
        origin.setFault(.slow(chunk: 4096, delay: .milliseconds(20)), for: "/seg002.m4s")
        let fetch = try DownloaderHarness(origin: origin) { $0.resourcesPerItem = 1 }
        defer { Task { await fetch.shutdown() } }
        try fetch.items.insert(DownloadItem(id: "p", url: fetch.url("/index.m3u8")))
        let run = Task { try await fetch.downloader.run("p") }
        // Wait until at least one segment is stored, then pause.
        try await waitUntil("a stored segment") { (try fetch.items.item("p"))?.segmentsDone ?? 0 >= 1 }
        try fetch.downloader.pause("p")
        let paused = try await run.value
        #expect(paused.state == .paused)
        #expect(paused.segmentsDone < 3)
        let doneBefore = try fetch.items.resources("p").filter { $0.done && $0.kind == "segment" }.map(\.url)
        #expect(!doneBefore.isEmpty)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: fetch.cacheDirectory.appendingPathComponent("tmp").path).isEmpty,
            "the interrupted write left nothing behind")

        origin.clearLog()
        for index in 0..<3 { origin.setFault(nil, for: "/seg00\(index).m4s") }
        #expect(try fetch.downloader.pause("p").state == .paused, "pausing twice is harmless")
        try fetch.downloader.resume("p")
        let finished = try await fetch.downloader.run("p")
        #expect(finished.state == .cached)
        let refetched = origin.requests.map(\.path)
        for url in doneBefore { #expect(!refetched.contains { url.hasSuffix($0) }, "\(url) was complete and not fetched again") }
        #expect(!refetched.contains("/index.m3u8"), "the stored playlist is reused")
        let states = fetch.events.compactMap { event -> ItemState? in
            if case .stateChanged(_, let state, _) = event { return state }
            return nil
        }
        #expect(states == [.downloading, .paused, .paused, .queued, .downloading, .cached])
        #expect(throws: DownloadError.invalidState) { try fetch.downloader.pause("p") }
        await fetch.shutdown()
        await origin.stop()
    }

    /// A pause under a rate limit does not wait for the limiter: at 16 B/s each 16 KiB batch after the first is
    /// due 1,024 s after the one before, and the paused run must end without waiting for it (it used to, so `pause`
    /// took up to a batch's time at the configured rate). The bound checked (300 s, generous for a loaded machine)
    /// is far below that wait.
    @Test func aPauseUnderARateLimitDoesNotWaitForTheNextBatch() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-rate-pause-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nseg0.ts\n#EXT-X-ENDLIST\n".utf8).write(
            to: dir.appendingPathComponent("index.m3u8"))
        try Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }).write(to: dir.appendingPathComponent("seg0.ts"))
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin) { $0.bytesPerSecond = 16 }
        defer { Task { await fetch.shutdown() } }
        try fetch.items.insert(DownloadItem(id: "slow", url: fetch.url("/index.m3u8")))
        let run = Task { try await fetch.downloader.run("slow") }
        // The segment is asked for; its first batch goes through the limiter's burst, the second waits its turn.
        try await waitUntil("the segment's request at the origin") { !origin.requests(matching: "/seg0.ts").isEmpty }
        try await Task.sleep(for: .milliseconds(500))
        let pausedAt = ContinuousClock.now
        try fetch.downloader.pause("slow")
        let ended = await endedValue(of: run, within: .seconds(300))
        #expect(ended?.state == .paused, "the run did not end within 300 s of the pause (\(ContinuousClock.now - pausedAt))")
        #expect(try fetch.stored("/seg0.ts") == nil)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fetch.cacheDirectory.appendingPathComponent("tmp").path).isEmpty)
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func progressIsWrittenInBatchesAndWhatWasStoredCountsWhenARunStops() async throws {
        let (origin, _) = try await start()
        for index in 1..<3 { origin.setFault(.slow(chunk: 4096, delay: .milliseconds(20)), for: "/seg00\(index).m4s") }
        // An interval no run reaches: only the end of a run writes (the batch bound, 64, is above this stream's size).
        let fetch = try DownloaderHarness(origin: origin) {
            $0.resourcesPerItem = 1
            $0.progressWriteInterval = .seconds(3600)
        }
        defer { Task { await fetch.shutdown() } }
        try fetch.items.insert(DownloadItem(id: "b", url: fetch.url("/index.m3u8")))
        let run = Task { try await fetch.downloader.run("b") }
        try await waitUntil("the first segment stored", interval: .milliseconds(5)) { try fetch.stored("/seg000.m4s") != nil }
        #expect(try fetch.items.item("b")?.segmentsDone == 0, "not written yet: the interval has not passed")
        try fetch.downloader.pause("b")
        #expect(try await run.value.state == .paused)
        let paused = try #require(try fetch.items.item("b"))
        let storedSegments = try (0..<3).filter { try fetch.stored("/seg00\($0).m4s") != nil }.count
        #expect(paused.segmentsDone >= 1 && paused.segmentsDone == storedSegments, "everything stored before the pause is counted")
        #expect(try fetch.items.resources("b").contains { $0.url.hasSuffix("/seg000.m4s") && $0.done })

        for index in 1..<3 { origin.setFault(nil, for: "/seg00\(index).m4s") }
        try fetch.downloader.resume("b")
        let finished = try await fetch.downloader.run("b")
        #expect(finished.state == .cached)
        #expect(finished.segmentsDone == finished.segmentsTotal && finished.bytesDone == finished.bytesTotal && finished.bytesDone > 0)
        #expect(try fetch.items.resources("b").allSatisfy(\.done))
        let progressEvents = fetch.events.filter { if case .progress = $0 { true } else { false } }
        // Besides the writes, each run announces its planned counters once (the total as the writes compute it).
        #expect(progressEvents.count == 4, "one per plan, one write when paused, one at the end: \(progressEvents.count)")
        await fetch.shutdown()
        await origin.stop()
    }

    /// A commit thread held by a gate: written bodies wait for their commit until `open()`.
    private final class HeldCommits: Sendable {
        let pool = NIOThreadPool(numberOfThreads: 1)
        private let gate = DispatchSemaphore(value: 0)

        init() {
            pool.start()
            _ = pool.runIfActive(eventLoop: MultiThreadedEventLoopGroup.singleton.next()) { [gate] in gate.wait() }
        }

        func open() { gate.signal() }

        func shutdown() async { try? await pool.shutdownGracefully() }
    }

    private static let media = ["/init.mp4", "/seg000.m4s", "/seg001.m4s", "/seg002.m4s"]

    /// A run of item `id` (the fMP4 stream, one transfer at a time) whose commits are held: returned once the
    /// origin has been asked for every media resource — one at a time, so each transfer but the last has ended.
    private struct HeldRun {
        let origin: TestOrigin
        let commits: HeldCommits
        let fetch: DownloaderHarness
        let run: Task<DownloadItem, any Error>

        func stop() async {
            await fetch.shutdown()
            await commits.shutdown()
            await origin.stop()
        }

        var tempFiles: [String] {
            get throws { try FileManager.default.contentsOfDirectory(atPath: fetch.cacheDirectory.appendingPathComponent("tmp").path) }
        }
    }

    private func runWithCommitsHeld(_ id: String, locked: Bool = false) async throws -> HeldRun {
        let (origin, _) = try await start()
        let commits = HeldCommits()
        // One transfer at a time: the next one can only start because the previous one does not wait for its commit.
        let fetch = try DownloaderHarness(origin: origin, commitThreadPool: commits.pool) { $0.resourcesPerItem = 1 }
        try fetch.items.insert(DownloadItem(id: id, url: fetch.url("/index.m3u8"), locked: locked))
        let run = Task { try await fetch.downloader.run(id) }
        let heldRun = HeldRun(origin: origin, commits: commits, fetch: fetch, run: run)
        do {
            try await waitUntil(
                "every transfer to run (asked so far: \(origin.requests.map(\.path)))", interval: .milliseconds(5)
            ) { Self.media.allSatisfy { !origin.requests(matching: $0).isEmpty } }
        } catch {
            commits.open()
            Task { await heldRun.stop() }
            throw error
        }
        return heldRun
    }

    @Test func transfersDoNotWaitForCommitsAndNothingCountsBeforeItsCommit() async throws {
        let held = try await runWithCommitsHeld("c")
        defer { Task { await held.stop() } }
        let fetch = held.fetch
        // Each body (smaller than a write batch) reaches tmp/ whole, in one write.
        try await waitUntil("every written body in tmp/ (there: \((try? held.tempFiles) ?? []))", interval: .milliseconds(5)) {
            try held.tempFiles.count >= Self.media.count
        }
        #expect(try held.tempFiles.count == Self.media.count, "the written bodies wait in tmp/")
        for path in Self.media { #expect(try fetch.stored(path) == nil, "\(path) is not committed while the commit thread is held") }
        #expect(try fetch.items.item("c")?.segmentsDone == 0, "a written body is not counted before its commit")

        held.commits.open()
        let finished = try await held.run.value
        #expect(finished.state == .cached)
        #expect(finished.segmentsDone == 3 && finished.bytesDone == finished.bytesTotal)
        for path in Self.media { #expect(try fetch.stored(path) != nil) }
        #expect(try held.tempFiles.isEmpty)
        await held.stop()
    }

    @Test func aRunPausedWithCommitsPendingCommitsAndCountsWhatItWrote() async throws {
        let held = try await runWithCommitsHeld("p")
        defer { Task { await held.stop() } }
        try held.fetch.downloader.pause("p")
        // Let the run notice the pause (it polls every 50 ms) and cancel its tasks while the commits still wait.
        try await Task.sleep(for: .milliseconds(300))
        held.commits.open()
        let paused = try await held.run.value
        #expect(paused.state == .paused)
        // What was written had been received whole: it is committed and counted, not thrown away. seg000 and
        // seg001 were written before seg002 was asked for (one transfer at a time); seg002 may have been cut short.
        let storedSegments = try (0..<3).filter { try held.fetch.stored("/seg00\($0).m4s") != nil }.count
        #expect(storedSegments >= 2, "\(storedSegments) segments committed")
        #expect(paused.segmentsDone == storedSegments)
        #expect(try held.tempFiles.isEmpty, "no written body is left behind")
        await held.stop()
    }

    @Test func rmWithCommitsPendingLeavesNothingOfTheItemInTheCache() async throws {
        let held = try await runWithCommitsHeld("r", locked: true)
        defer { Task { await held.stop() } }
        let fetch = held.fetch
        try fetch.downloader.remove("r", keepMetadata: false)
        held.commits.open()
        _ = try? await held.run.value
        // The commits landed after rm's eviction; the run evicts them once they are done.
        for path in Self.media + ["/index.m3u8"] { #expect(try fetch.stored(path) == nil, "\(path) is gone") }
        #expect(try fetch.store.usage().count == 0)
        #expect(try fetch.store.lockedBytes() == 0, "nothing locked is left to stay forever")
        #expect(try held.tempFiles.isEmpty)
        await held.stop()
    }

    @Test func rmEvictsTheItemsObjectsAndForgetsIt() async throws {
        let (origin, _) = try await start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        try await fetch.fetch("/index.m3u8", id: "r1")
        #expect(try fetch.stored("/seg000.m4s") != nil)
        try fetch.downloader.remove("r1", keepMetadata: true)
        #expect(try fetch.items.item("r1")?.state == .deleted)
        #expect(try fetch.stored("/seg000.m4s") == nil && fetch.stored("/index.m3u8") == nil && fetch.stored("/init.mp4") == nil)
        #expect(try fetch.store.usage().count == 0)
        try fetch.downloader.remove("r1", keepMetadata: false)
        #expect(try fetch.items.item("r1") == nil)
        #expect(throws: DownloadError.unknownItem) { try fetch.downloader.remove("r1", keepMetadata: false) }
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func lockedItemsSurviveEvictionUnlockedOnesDoNot() async throws {
        let (origin, dir) = try await start()
        let total = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { !$0.hasPrefix(".") }
            .reduce(Int64(0)) { $0 + Int64((try? Data(contentsOf: dir.appendingPathComponent($1)).count) ?? 0) }
        // Room for the stream twice.
        let fetch = try DownloaderHarness(origin: origin, maxBytes: total * 2)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8", id: "locked")
        #expect(item.state == .cached)
        let usage = try fetch.store.usage()
        #expect(fetch.store.lookup(try fetch.key("/seg000.m4s")) != nil, "stored: \(usage) of \(total * 2)")
        try fetch.downloader.setLocked("locked", true)
        #expect(fetch.store.lookup(try fetch.key("/seg000.m4s"))?.locked == true)

        // Filling the cache evicts everything unlocked, never the item's objects.
        let chunk = Int(total / 2)
        for index in 0..<6 {
            let writer = try? fetch.store.makeWriter(for: CacheKey(storedValue: "http://other/\(index)"), expectedLength: Int64(chunk))
            try? writer?.write([UInt8](repeating: 1, count: chunk))
            _ = try? writer?.finish(contentType: nil, kind: .segment)
        }
        #expect(fetch.store.lookup(CacheKey(storedValue: "http://other/0")) == nil, "older unlocked objects were evicted")
        #expect(try fetch.stored("/seg000.m4s") != nil && fetch.stored("/seg002.m4s") != nil && fetch.stored("/index.m3u8") != nil)

        try fetch.downloader.setLocked("locked", false)
        #expect(fetch.store.lookup(try fetch.key("/seg000.m4s"))?.locked == false)
        for index in 0..<2 {
            let big = try fetch.store.makeWriter(for: CacheKey(storedValue: "http://other/big\(index)"), expectedLength: total)
            try big.write([UInt8](repeating: 2, count: Int(total)))
            _ = try big.finish(contentType: nil, kind: .segment)
        }
        #expect(try fetch.stored("/seg000.m4s") == nil, "unlocked objects are evicted again")
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func expiredItemsAreEvicted() async throws {
        let (origin, _) = try await start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        // The expiry is far off and the check is asked as of a given moment: a starved machine that took longer than
        // a short expiry to download the item made it expire on the way (it failed as `expired` before the check).
        let expiry = Date().addingTimeInterval(3600)
        let item = try await fetch.fetch("/index.m3u8", id: "exp", expiresAt: expiry)
        #expect(item.state == .cached)
        #expect(try fetch.downloader.expireDue(now: expiry.addingTimeInterval(-1)).isEmpty)
        #expect(try fetch.downloader.expireDue(now: expiry.addingTimeInterval(1)) == ["exp"])
        let expired = try #require(try fetch.items.item("exp"))
        #expect(expired.state == .expired && expired.errorCode == "expired")
        #expect(try fetch.stored("/seg000.m4s") == nil && fetch.stored("/index.m3u8") == nil)
        #expect(throws: DownloadError.invalidState) { try fetch.downloader.resume("exp") }
        // An item whose expiry passed before it ran expires instead of downloading.
        try fetch.items.insert(DownloadItem(id: "late", url: fetch.url("/index.m3u8"), expiresAt: Date().addingTimeInterval(-1)))
        origin.clearLog()
        #expect(try await fetch.downloader.run("late").state == .expired)
        #expect(origin.requests.isEmpty)
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func schedulerRunsQueuedItemsTwoAtATime() async throws {
        let (origin, _) = try await start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        for id in ["q1", "q2", "q3"] { try fetch.items.insert(DownloadItem(id: id, url: fetch.url("/index.m3u8"))) }
        let scheduler = DownloadScheduler(downloader: fetch.downloader, pollInterval: .milliseconds(50))
        // One poll by hand: it starts exactly two of the three (counted in the same actor turn, so none can have
        // finished yet), so one at a time or all at once fail here, on any machine.
        #expect(await scheduler.tick() == 2)
        #expect(await scheduler.tick() <= 2)
        let task = Task { await scheduler.run() }
        defer { task.cancel() }
        var maxActive = 0
        try await waitUntil("every item to be run to its end", interval: .milliseconds(5)) {
            maxActive = max(maxActive, await scheduler.active.count)
            return try fetch.items.items().allSatisfy(\.state.isSettled)
        }
        task.cancel()
        await task.value
        let settled = try fetch.items.items()
        #expect(
            settled.allSatisfy { $0.state == .cached },
            "\(settled.map { "\($0.id) \($0.state) \($0.errorCode ?? "") \($0.errorMessage ?? "")" })")
        #expect(maxActive <= 2)
        await fetch.shutdown()
        await origin.stop()
    }

    /// `--rate` holds the whole download to the cap (a lower bound on the time, so a slow machine cannot fail it),
    /// and the batches it is paced in still store exact bytes.
    @Test func theRateCapPacesTheDownload() async throws {
        let (origin, dir) = try await start()
        let rate: Int64 = 400_000
        let fetch = try DownloaderHarness(origin: origin) { $0.bytesPerSecond = rate }
        defer { Task { await fetch.shutdown() } }
        try fetch.items.insert(DownloadItem(id: "r", url: fetch.url("/index.m3u8")))
        let started = ContinuousClock.now
        let item = try await fetch.downloader.run("r")
        let elapsed = ContinuousClock.now - started
        #expect(item.state == .cached)
        let media = try fetch.items.resources("r").filter { $0.kind != "playlist" }
        let bytes = media.reduce(Int64(0)) { $0 + ($1.size ?? 0) }
        #expect(bytes > 4 * rate / 10, "the stream is big enough to need pacing")
        // The bucket starts full (a quarter second of bytes); everything beyond it is paid for at the rate.
        let floor = Double(bytes - rate / 4) / Double(rate) * 0.9
        #expect(elapsed >= .seconds(floor), "\(bytes) bytes in \(elapsed) at \(rate) B/s")
        for resource in media {
            let path = try #require(URL(string: resource.url)?.path)
            let original = try Data(contentsOf: dir.appendingPathComponent(path))
            let stored = try #require(fetch.store.lookup(CacheKey(try OriginURL(resource.url))))
            #expect(try Data(contentsOf: URL(fileURLWithPath: stored.path)) == original, "\(path)")
        }
    }
}
