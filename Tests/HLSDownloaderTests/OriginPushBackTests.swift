import Foundation
import HLSCacheCore
import HLSDownloader
import HLSTestSupport
import Testing

/// An origin that answers 429 (or 503) gets half as many transfers at a time from that item for the rest of the run.
@Suite struct OriginPushBackTests {
    /// Waits for `condition`, bounded generously (the machine may be loaded; nothing here is timed), and fails the
    /// test there if it never holds.
    private static func wait(_ what: String, _ origin: TestOrigin, _ condition: () throws -> Bool) async throws {
        try await waitUntil("\(what); the origin was asked for \(origin.requests(containing: "/").map(\.path))") { try condition() }
    }

    @Test func a429HalvesTheTransfersAtATime() async throws {
        let origin = TestOrigin(root: FileManager.default.temporaryDirectory)
        try await origin.start()
        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<8 { text += "#EXTINF:2.0,\nseg\(index).ts\n" }
        text += "#EXT-X-ENDLIST\n"
        origin.setBody(Array(text.utf8), for: "/index.m3u8")
        // seg4 is refused once (then served); the others are held by the origin halfway until released.
        origin.setBody((0..<3000).map { UInt8($0 % 251) }, contentType: "video/mp2t", for: "/seg4.ts")
        origin.setFault(.busyFirst(times: 1, seconds: 0), for: "/seg4.ts")
        for index in 0..<8 where index != 4 { origin.setFault(.pattern(length: 1000, holdAt: 500), for: "/seg\(index).ts") }
        let fetch = try DownloaderHarness(origin: origin, configure: { $0.resourcesPerItem = 4 })
        try fetch.items.insert(DownloadItem(id: "pushed", url: fetch.url("/index.m3u8")))
        let run = Task { try await fetch.downloader.run("pushed") }

        // Four at a time: seg0-3 held. seg0 let go: seg4 takes its place, is refused, asked again and stored.
        try await Self.wait("seg0-3 asked for", origin) { (0..<4).allSatisfy { !origin.requests(matching: "/seg\($0).ts").isEmpty } }
        #expect(origin.requests(matching: "/seg4.ts").isEmpty)
        origin.releasePattern("/seg0.ts")
        try await Self.wait("seg4 stored", origin) { fetch.store.lookup(try fetch.key("/seg4.ts")) != nil }
        #expect(origin.requests(matching: "/seg4.ts").count == 2)
        // Still four at a time, seg5 would start now (three held); two at a time it waits until only one is left.
        origin.releasePattern("/seg1.ts")
        try await Self.wait("seg1 stored", origin) { fetch.store.lookup(try fetch.key("/seg1.ts")) != nil }
        let released = ContinuousClock.now
        origin.releasePattern("/seg2.ts")
        try await Self.wait("seg5 asked for", origin) { !origin.requests(matching: "/seg5.ts").isEmpty }
        let asked = try #require(origin.requests(matching: "/seg5.ts").first)
        #expect(asked.time > released, "a transfer started while three were in flight after the 429")

        for index in [3, 5, 6, 7] { origin.releasePattern("/seg\(index).ts") }
        let done = try await run.value
        #expect(done.state == .cached)
        let notes = fetch.events.compactMap { event -> String? in
            if case .note(_, let message) = event { return message }
            return nil
        }
        #expect(notes.contains { $0.contains("answered 429") && $0.contains("2 transfer(s) at a time") }, "\(notes)")
        await fetch.shutdown()
        await origin.stop()
    }
}
