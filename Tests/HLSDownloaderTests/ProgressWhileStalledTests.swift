import Foundation
import HLSCacheCore
import HLSDownloader
import HLSTestSupport
import NIOConcurrencyHelpers
import Testing

/// Progress is written a short interval after a resource is stored even when nothing else is stored after it: the
/// transfers that follow may stall for minutes, and `ls`, a follower and the SSE stream must still see what is done.
@Suite struct ProgressWhileStalledTests {
    @Test func aStoredSegmentShowsWhileTheNextOnesStall() async throws {
        let dir = try await Streams.stream("fmp4", { try FFmpeg.makeFMP4(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".m4s") }.sorted()
        #expect(segments.count >= 3)
        // Everything but the init section and the first segment stalls after its first bytes.
        for name in segments.dropFirst() { origin.setFault(.stallAfter(bytes: 4096), for: "/" + name) }
        let progressEvents = NIOLockedValueBox(0)
        let fetch = try DownloaderHarness(
            origin: origin,
            configure: { $0.resourcesPerItem = 2 },
            observe: { event in
                if case .progress(_, let p) = event, p.segmentsDone >= 1 { progressEvents.withLockedValue { $0 += 1 } }
            })
        try fetch.items.insert(DownloadItem(id: "stalled", url: fetch.url("/index.m3u8")))
        let run = Task { try await fetch.downloader.run("stalled") }

        // Waits for the row, bounded generously: without the deferred write it never changes while the rest stall.
        let deadline = ContinuousClock.now + .seconds(120)
        var row = try fetch.items.item("stalled")
        while (row?.segmentsDone ?? 0) < 1 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            row = try fetch.items.item("stalled")
        }
        let seen = try #require(row)
        #expect(seen.state == .downloading && seen.segmentsDone >= 1 && seen.segmentsDone < seen.segmentsTotal, "\(seen)")
        #expect(seen.bytesDone > 0)
        #expect(progressEvents.withLockedValue { $0 } >= 1, "a progress event announced the stored segment")

        try fetch.downloader.pause("stalled")
        let paused = try await run.value
        #expect(paused.state == .paused)
        await fetch.shutdown()
        await origin.stop()
    }
}
