import Foundation
import HLSCacheCore
import HLSDownloader
import HLSTestSupport
import NIOConcurrencyHelpers
import Testing

/// After a pause and resume, the progress total is the stored sizes plus the estimate's share for what is left
/// (fetch.md, Precache) from the moment the resumed run is planned: never below what is done, and above it while
/// segments are left — a follower's first line showed `bytesTotal == bytesDone` at 2 of 30 segments.
@Suite(.serialized) struct ResumedProgressTotalTests {
    /// The counters the item row holds when the run announces its plan, and every progress event.
    private final class Observed: Sendable {
        let counts = NIOLockedValueBox<[(what: String, done: Int64, total: Int64, segments: Int, segmentsTotal: Int)]>([])

        func record(_ what: String, _ done: Int64, _ total: Int64, _ segments: Int, _ segmentsTotal: Int) {
            counts.withLockedValue { $0.append((what, done, total, segments, segmentsTotal)) }
        }

        func clear() { counts.withLockedValue { $0.removeAll() } }
    }

    @Test func aResumedRunNeverAnnouncesATotalBelowWhatIsDone() async throws {
        let dir = try await Streams.stream("fmp4", { try FFmpeg.makeFMP4(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-total-\(UUID().uuidString)")
        let rows = try ItemStore(directory: cache.path)
        let observed = Observed()
        let fetch = try DownloaderHarness(
            origin: origin, cacheDirectory: cache, configure: { $0.resourcesPerItem = 1 },
            observe: { event in
                switch event {
                case .planned(let id, _, _, _):
                    // Emitted right after the plan is written: the row as a follower (or `ls`) reads it now.
                    if let item = try? rows.item(id) {
                        observed.record("row at plan", item.bytesDone, item.bytesTotal, item.segmentsDone, item.segmentsTotal)
                    }
                case .progress(_, let p):
                    observed.record("progress", p.bytesDone, p.bytesTotal, p.segmentsDone, p.segmentsTotal)
                default:
                    break
                }
            })
        // The media playlist has no BANDWIDTH: the estimate is the average stored segment.
        // The second segment stalls until the pause cancels it, so the pause always finds segments left, however
        // slow the machine (a slowed but finite segment let a loaded run store every segment before the pause).
        origin.setFault(.stallAfter(bytes: 4096), for: "/seg001.m4s")
        try fetch.items.insert(DownloadItem(id: "t", url: fetch.url("/index.m3u8")))
        let run = Task { try await fetch.downloader.run("t") }
        try await waitUntil("a stored segment") { (try fetch.items.item("t"))?.segmentsDone ?? 0 >= 1 }
        try fetch.downloader.pause("t")
        let paused = try await run.value
        #expect(paused.state == .paused && paused.segmentsDone >= 1 && paused.segmentsDone < paused.segmentsTotal)

        observed.clear()
        origin.setFault(nil, for: "/seg001.m4s")
        try fetch.downloader.resume("t")
        let finished = try await fetch.downloader.run("t")
        #expect(finished.state == .cached)
        let counts = observed.counts.withLockedValue { $0 }
        #expect(counts.first?.what == "row at plan")
        #expect(counts.first?.done == paused.bytesDone, "the resumed run starts from what the paused one stored")
        for count in counts {
            #expect(count.total >= count.done, "\(count.what): total \(count.total) below done \(count.done)")
            if count.segments < count.segmentsTotal {
                #expect(
                    count.total > count.done,
                    "\(count.what): \(count.segments)/\(count.segmentsTotal) segments, total \(count.total) == done")
            }
        }
        await fetch.shutdown()
        await origin.stop()
    }
}
