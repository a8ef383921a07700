import Foundation
import HLSDownloader
import HLSTestSupport
import NIOCore
import Testing

/// The downloader runs the state machine's actions in one place (issue 29): a `pause` or an `rm` made in this
/// process stops this process's run of the item at once, instead of leaving it to notice the new state at its next
/// poll of the items table (the way a run in another process notices).
@Suite struct ItemTransitionTests {
    /// A one-segment stream whose segment the origin holds back for an hour: only a stopped run ends before that.
    private static func stalledStream() async throws -> (TestOrigin, DownloaderHarness, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-transition-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try Data("#EXTM3U\n#EXT-X-TARGETDURATION:4\n#EXTINF:4,\nseg0.ts\n#EXT-X-ENDLIST\n".utf8).write(
            to: dir.appendingPathComponent("index.m3u8"))
        try Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: dir.appendingPathComponent("seg0.ts"))
        let origin = TestOrigin(root: dir)
        try await origin.start()
        origin.setFault(.stall(delay: .hours(1)), for: "/seg0.ts")
        // The run's own poll of the items table, and the origin's read timeout, are an hour: neither ends the run.
        let fetch = try DownloaderHarness(
            origin: origin, configure: { $0.statePollInterval = .seconds(3600) }, configureOrigin: { $0.readTimeout = .hours(1) })
        return (origin, fetch, dir)
    }

    /// Waits (up to 300 s: in a full parallel test run at load 19, 60 s was once not enough) until the run asks for the
    /// stalled segment.
    private static func waitForTheSegmentRequest(_ origin: TestOrigin) async throws {
        try await waitUntil("the run to ask for the segment", timeout: .seconds(300)) { !origin.requests(matching: "/seg0.ts").isEmpty }
    }

    @Test func aPauseStopsThisProcessesRunAtOnce() async throws {
        let (origin, fetch, dir) = try await Self.stalledStream()
        defer { try? FileManager.default.removeItem(at: dir) }
        try fetch.items.insert(DownloadItem(id: "p", url: fetch.url("/index.m3u8")))
        let run = Task { try await fetch.downloader.run("p") }
        try await Self.waitForTheSegmentRequest(origin)
        #expect(try fetch.downloader.pause("p").state == .paused)
        let ended = await endedValue(of: run, within: .seconds(300))
        #expect(ended?.state == .paused, "the paused run did not stop")
        #expect(fetch.events.contains { if case .stateChanged(id: "p", state: .paused, errorCode: _) = $0 { true } else { false } })
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func anRmStopsThisProcessesRunAndEvictsWhatItStored() async throws {
        let (origin, fetch, dir) = try await Self.stalledStream()
        defer { try? FileManager.default.removeItem(at: dir) }
        try fetch.items.insert(DownloadItem(id: "r", url: fetch.url("/index.m3u8")))
        let run = Task { try await fetch.downloader.run("r") }
        try await Self.waitForTheSegmentRequest(origin)
        #expect(try fetch.stored("/index.m3u8") != nil, "the playlist is stored before the segment is asked for")
        try fetch.downloader.remove("r", keepMetadata: true)
        let ended = await endedValue(of: run, within: .seconds(300))
        #expect(ended?.state == .deleted, "the removed item's run did not stop")
        #expect(try fetch.stored("/index.m3u8") == nil, "the removed item's playlist was not evicted")
        await fetch.shutdown()
        await origin.stop()
    }
}
