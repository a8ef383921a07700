import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import Testing

/// A recording's readings of its live playlist keep what the cache holds of the window served (issue 44): a viewer's
/// copies, stored through the proxy with an expiry counted from then, do not expire while the recording — which reads
/// the origin's playlist itself — is on its way to them.
@Suite struct RecordingWindowTests {
    /// The live window lists three segments a viewer stored (each with the expiry it got then); the recording reads it
    /// and records the first (its duration is then reached). That reading pushed the others' expiry to the window's
    /// lifetime from the reading (3 × 1000 s + 2 target durations), as the proxy's readings do; the one recorded is
    /// kept for good; the origin was asked for none of them. Before the fix the others kept the viewer's expiry, and a
    /// recording reaching one after it passed (a stalled test process left no viewer reading through the proxy) asked
    /// the origin for it again.
    @Test func aRecordingsReadingKeepsTheWindowAViewerStoredServed() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-recwindow-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let bodies = (0..<3).map { _ in randomBytes(1880) }
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1000\n#EXT-X-MEDIA-SEQUENCE:0\n"
        for index in 0..<3 {
            playlist += "#EXTINF:1000,\nseg\(index).ts\n"
            try Data(bodies[index]).write(to: dir.appendingPathComponent("seg\(index).ts"))
        }
        try Data(playlist.utf8).write(to: dir.appendingPathComponent("live.m3u8"))
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let harness = try DownloaderHarness(origin: origin)
        // As a viewer stored them through the proxy: each with a lifetime counted from then (far enough ahead that a
        // stalled test process cannot let it pass before the recording reads the window).
        let stored = Date()
        for index in 0..<3 {
            let writer = try harness.store.makeWriter(for: try harness.key("/seg\(index).ts"), expectedLength: 1880)
            try writer.write(bodies[index])
            _ = try writer.finish(contentType: "video/mp2t", kind: .segment, expiresAt: stored.addingTimeInterval(600))
        }

        var item = DownloadItem(id: "rec", url: harness.url("/live.m3u8"))
        item.record = RecordSpec(duration: 1)
        try harness.items.insert(item)
        _ = try await harness.downloader.run("rec")

        #expect(try harness.items.recorded("rec", rendition: 0).map(\.sequence) == [0])
        #expect(harness.store.knownExpiry(of: try harness.key("/seg0.ts")) == nil, "the recorded segment is kept for good")
        for index in 1..<3 {
            let expiry = try #require(harness.store.knownExpiry(of: try harness.key("/seg\(index).ts")))
            #expect(
                expiry.timeIntervalSince(stored) >= 4000,
                "seg\(index) served for the window's lifetime from the recording's reading, not the viewer's \(expiry)")
        }
        #expect(origin.requests.filter { $0.path.hasPrefix("/seg") }.isEmpty, "every segment was the cache's")
        await harness.shutdown()
        await origin.stop()
    }
}
