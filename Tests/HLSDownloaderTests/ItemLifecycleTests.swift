import Foundation
import HLSCacheCore
import HLSDownloader
import HLSTestSupport
import Testing

/// Issue 25, the SDKs' lifecycle: create without starting then start; delete the files keeping the record, then
/// resume; change the expiry after creation (the keys follow); started and completed times.
@Suite(.serialized) struct ItemLifecycleTests {
    @Test func createdWithoutStartingItLoadsItsPlaylistsThenWaitsUntilResumed() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        var item = DownloadItem(id: "later", url: fetch.url("/master.m3u8"))
        item.state = .ready
        try fetch.items.insert(item)
        let loaded = try await fetch.downloader.prepare("later")
        #expect(loaded.state == .ready)
        #expect(loaded.renditions.count == 3 && loaded.segmentsTotal > 0 && loaded.bytesTotal > 0, "\(loaded)")
        #expect(loaded.startedAt == nil, "not started")
        #expect(origin.requests.allSatisfy { $0.path.hasSuffix(".m3u8") }, "no segment fetched: \(origin.requests.map(\.path))")
        #expect(try fetch.items.runnable(limit: 10).isEmpty, "a scheduler leaves a ready item alone")
        await #expect(throws: DownloadError.invalidState) { try await fetch.downloader.run("later") }

        try fetch.downloader.resume("later")
        let done = try await fetch.downloader.run("later")
        #expect(done.state == .cached && done.segmentsDone == done.segmentsTotal)
        let started = try #require(done.startedAt)
        let completed = try #require(done.completedAt)
        #expect(started <= completed)
    }

    @Test func aResumeAfterTheFilesWereDeletedDownloadsItAgain() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let first = try await fetch.fetch("/master.m3u8", id: "files")
        #expect(first.state == .cached)
        try fetch.downloader.remove("files", keepMetadata: true)
        let deleted = try #require(try fetch.items.item("files"))
        #expect(deleted.state == .deleted && deleted.bytesDone == 0 && deleted.segmentsDone == 0)
        #expect(try fetch.stored("/v0/seg000.ts") == nil)
        #expect(try fetch.items.resources("files").allSatisfy { !$0.done })

        origin.clearLog()
        #expect(try fetch.downloader.resume("files").state == .queued)
        let again = try await fetch.downloader.run("files")
        #expect(again.state == .cached && again.segmentsDone == again.segmentsTotal && again.segmentsTotal == first.segmentsTotal)
        #expect(again.bytesDone == first.bytesDone)
        #expect(!origin.requests(containing: ".ts").isEmpty, "the segments were fetched again")
        let original = try Data(contentsOf: dir.appendingPathComponent("v0/seg000.ts"))
        #expect(try fetch.stored("/v0/seg000.ts") == [UInt8](original))
    }

    /// A rental extended past its first expiry: the item is not expired when the first one passes (the sweep is
    /// given that moment, no clock is waited for), and its key is served until the new one.
    @Test func anExpiryExtendedPastTheFirstKeepsTheItemAndItsKeys() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let now = Date()
        let item = try await fetch.fetch("/index.m3u8", id: "rental", seconds: 4, expiresAt: now.addingTimeInterval(600))
        #expect(item.state == .partiallyCached)
        let keys = fetch.keys
        let keyID = keys.id(for: try OriginURL(fetch.url("/keys/key0.key")))
        let before = try #require(try keys.record(keyID)?.expiresAt)
        #expect(before <= now.addingTimeInterval(601), "the key is served no longer than its item")

        let extended = now.addingTimeInterval(7200)
        let changed = try fetch.downloader.change("rental", ItemChanges(expiresAt: .some(extended)))
        #expect(changed.expiresAt.map { abs($0.timeIntervalSince(extended)) < 0.01 } == true)
        #expect(try fetch.downloader.expireDue(now: now.addingTimeInterval(1200)).isEmpty, "not expired past its first expiry")
        #expect(try fetch.items.item("rental")?.state == .partiallyCached)
        let after = try #require(try keys.record(keyID))
        #expect(after.isStored)
        #expect(
            after.expiresAt.map { $0 > now.addingTimeInterval(7000) } == true,
            "the key follows the item: \(String(describing: after.expiresAt))")
        #expect(
            try fetch.downloader.offlineStatus(of: try fetch.items.require("rental")).until.map { $0 > now.addingTimeInterval(7000) }
                == true)

        let locked = try fetch.downloader.change("rental", ItemChanges(locked: true))
        #expect(locked.locked)
        // Past the new expiry it does expire, and its key with it.
        #expect(try fetch.downloader.expireDue(now: extended.addingTimeInterval(1)) == ["rental"])
        #expect(throws: DownloadError.invalidState) { try fetch.downloader.change("rental", ItemChanges(locked: false)) }
    }

    /// The CLI: `fetch --no-start` then `resume`; `set` changes the expiry (absolute) and the lock.
    @Test func noStartSetAndResumeFromTheCommandLine() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-lifecycle-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let common = ["--cache-dir", cache.path, "--free-disk-cushion", "0"]
        func show() async throws -> [String: Any] {
            let result = try await CLI.run(["show", "cli", "--json"] + common)
            return (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]) ?? [:]
        }
        let created = try await CLI.run(["fetch", origin.baseURL + "/master.m3u8", "--id", "cli", "--no-start"] + common)
        #expect(created.status == 0)
        #expect(created.stdout.contains("cli: ready, 3 renditions"), "\(created.stdout)")
        #expect(origin.requests.allSatisfy { $0.path.hasSuffix(".m3u8") })
        #expect(try await show()["state"] as? String == "ready")

        let set = try await CLI.run(["set", "cli", "--expires-at", "2030-01-01T00:00:00Z", "--lock", "--rate", "4MiB"] + common)
        #expect(set.status == 0, "\(set.stdout)")
        let shown = try await show()
        #expect((shown["expiresAt"] as? String)?.hasPrefix("2030-01-01T00:00:00") == true, "\(shown)")
        #expect(shown["locked"] as? Bool == true)
        #expect(shown["rate"] as? Int == 4 << 20, "\(shown)")
        #expect(try await CLI.run(["set", "cli"] + common).status == 64, "nothing to change")

        let resumed = try await CLI.run(["resume", "cli"] + common)
        #expect(resumed.status == 0)
        let done = try await show()
        #expect(done["state"] as? String == "cached", "\(done)")
        #expect(done["startedAt"] is String && done["completedAt"] is String && done["playableOffline"] as? Bool == true, "\(done)")
        #expect((done["playbackURL"] as? String)?.hasSuffix("/api/v1/items/cli/master.m3u8") == true)
    }
}
