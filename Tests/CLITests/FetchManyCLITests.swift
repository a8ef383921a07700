import Foundation
import HLSTestSupport
import Testing

/// `hlscache fetch URL URL…` and `fetch --from FILE` (an M3U list with `#EXTINF` titles), `fetch --expires-at`, against
/// ffmpeg streams on a real origin (issue 43).
@Suite struct FetchManyCLITests {
    private static func json(_ line: Substring) -> [String: Any] {
        ((try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]) ?? [:]
    }

    @Test func anM3UListIsRecordedInOneGoThenDownloadedAndAgainIsNothingNew() async throws {
        let root = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let origin = TestOrigin(root: root)
        try await origin.start()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fetch-many-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let cache = ["--cache-dir", dir.appendingPathComponent("cache").path]
        let list = dir.appendingPathComponent("list.m3u")
        try """
        #EXTM3U
        #EXTINF:-1 tvg-name="Low, quiet",Low rendition
        \(origin.baseURL)/v0/index.m3u8

        #EXTINF:-1,Everything
        \(origin.baseURL)/master.m3u8
        not a url
        """.write(to: list, atomically: true, encoding: .utf8)

        let run = try await CLI.run(["fetch", "--from", list.path, "--seconds", "2", "--json"] + cache)
        // The bad line is refused (exit 64) after the others were downloaded.
        #expect(run.status == 64, "\(run.stderr)")
        #expect(run.stderr.contains("1 of 3 entries refused"), "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(Self.json)
        let entries = lines.filter { $0["event"] as? String == "entry" }
        #expect(entries.map { $0["result"] as? String } == ["created", "created", "refused"], "\(run.stdout)")
        let done = lines.filter { $0["event"] as? String == "done" }
        #expect(done.count == 2)
        #expect(done.allSatisfy { ["partiallyCached", "cached"].contains($0["state"] as? String ?? "") }, "\(done)")

        let listed = try await CLI.run(["ls", "--json", "--sort", "title"] + cache)
        let items = listed.stdout.split(separator: "\n").map(Self.json)
        #expect(items.map { $0["title"] as? String } == ["Everything", "Low rendition"], "\(listed.stdout)")

        // The same list again: both exist (same URL), nothing is downloaded again.
        let again = try await CLI.run(["fetch", "--from", list.path, "--json"] + cache)
        let results = again.stdout.split(separator: "\n").map(Self.json).filter { $0["event"] as? String == "entry" }
        #expect(results.map { $0["result"] as? String } == ["exists", "exists", "refused"], "\(again.stdout)")
        #expect(results.prefix(2).map { $0["id"] as? String } == entries.prefix(2).map { $0["id"] as? String })
        #expect(try await CLI.run(["ls", "--json"] + cache).stdout.split(separator: "\n").count == 2)

        // Several URLs on the command line, recorded for `serve` (--detach), with an absolute expiry.
        let detached = try await CLI.run(
            [
                "fetch", "\(origin.baseURL)/v1/index.m3u8", "\(origin.baseURL)/v0/index.m3u8", "--detach", "--expires-at",
                "2099-06-01T12:00:00Z",
            ] + cache)
        #expect(detached.status == 0, "\(detached.stderr)")
        #expect(detached.stdout.contains("created ") && detached.stdout.contains("exists "), "\(detached.stdout)")
        let queued = try await CLI.run(["ls", "--state", "queued", "--json"] + cache)
        let object = Self.json(try #require(queued.stdout.split(separator: "\n").first))
        #expect((object["expiresAt"] as? String)?.hasPrefix("2099-06-01T12:00:00") == true, "\(queued.stdout)")
        await origin.stop()
    }

    @Test func optionsOfOneItemAndPastExpiriesAreRefused() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fetch-many-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let cache = ["--cache-dir", dir.path]
        let (a, b) = ("http://127.0.0.1:1/a.m3u8", "http://127.0.0.1:1/b.m3u8")
        for extra in [["--id", "x"], ["--title", "T"], ["--dry-run"]] {
            let refused = try await CLI.run(["fetch", a, b, "--detach"] + extra + cache)
            #expect(refused.status == 64 && refused.stderr.contains("names one item"), "\(extra): \(refused.stderr)")
        }
        let past = try await CLI.run(["fetch", a, "--detach", "--expires-at", "2001-01-01T00:00:00Z"] + cache)
        #expect(past.status == 64 && past.stderr.contains("in the past"), "\(past.stderr)")
        let both = try await CLI.run(["fetch", a, "--detach", "--expires-at", "2099-01-01T00:00:00Z", "--expires", "1d"] + cache)
        #expect(both.status == 64, "\(both.stderr)")
        let fine = try await CLI.run(["fetch", a, "--detach", "--id", "one", "--expires-at", "2099-01-01T00:00:00Z", "--json"] + cache)
        #expect(fine.status == 0, "\(fine.stderr)")
        let shown = try await CLI.run(["show", "one", "--json"] + cache)
        #expect((Self.json(Substring(shown.stdout))["expiresAt"] as? String)?.hasPrefix("2099-01-01T00:00:00") == true, "\(shown.stdout)")
        let none = try await CLI.run(["fetch"] + cache)
        #expect(none.status == 64)
    }
}
