import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

/// Issue 25, "an item playback URL": an item's own multivariant playlist lists only the renditions it selected, and
/// its offline form ends each media playlist after the stored part.
@Suite("Admin API: item playback playlists")
struct AdminPlaybackURLTests {
    static func decode(_ url: String) async throws -> (frames: [String], stderr: String) {
        let (stdout, stderr) = try await offThread {
            try FFmpeg.run(
                FFmpeg.ffmpeg, ["-hide_banner", "-loglevel", "error", "-nostdin", "-i", url, "-map", "0", "-f", "framemd5", "-"])
        }
        return (String(decoding: stdout, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init), stderr)
    }

    @Test("--variants worst: the item's playlist lists that variant only, and ffmpeg reads nothing of the others")
    func playbackPlaylistListsOnlyTheSelectedRenditions() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"worst","variants":"worst"}"#)
        #expect(created.status == 201)
        #expect(created.json["playbackPath"] as? String == "/api/v1/items/worst/master.m3u8")
        #expect(created.json["offlinePlaybackPath"] as? String == "/api/v1/items/worst/offline.m3u8")
        _ = try await h.eventually("the item cached") { try h.items.item("worst")?.state == .cached ? true : nil }

        let master = try await h.request(.GET, h.base + "/api/v1/items/worst/master.m3u8")
        #expect(master.status == 200)
        #expect(master.headers.first(name: "Content-Type") == "application/vnd.apple.mpegurl")
        let text = master.text
        let origin = try String(contentsOf: root.appendingPathComponent("master.m3u8"), encoding: .utf8)
        #expect(origin.contains("v0/index.m3u8") && origin.contains("v1/index.m3u8"))
        #expect(text.contains("/http/127.0.0.1:\(h.origin.port)/v1/index.m3u8"), "\(text)")
        #expect(!text.contains("v0/index.m3u8"), "the variant the item did not select is listed: \(text)")
        #expect(text.components(separatedBy: "#EXT-X-STREAM-INF").count == 2, "\(text)")
        #expect(text.contains("#EXT-X-MEDIA:TYPE=AUDIO"), "the audio rendition stays: \(text)")

        h.origin.clearLog()
        let played = try await Self.decode(h.base + "/api/v1/items/worst/master.m3u8")
        #expect(!played.frames.isEmpty)
        #expect(played.stderr.isEmpty, "\(played.stderr)")
        #expect(h.origin.requests(containing: "/v0/").isEmpty, "the player was offered the other variant: \(h.origin.requests.map(\.path))")
        let unknown = try await h.request(.GET, h.base + "/api/v1/items/nope/master.m3u8")
        #expect(unknown.status == 404)
    }

    @Test("the offline form of a 4-second item ends its media playlists after 4 s; ffmpeg plays it with the origin stopped, exit 0")
    func offlineFormEndsAfterTheStoredPart() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"four","seconds":4}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("the item partially cached") { try h.items.item("four")?.state == .partiallyCached ? true : nil }
        let whole = try await Self.decode(h.originURL("/master.m3u8"))
        await h.origin.stop()
        let shown = try await h.request(.GET, h.api("/items/four"))
        let storage = try #require(shown.json["renditionsStored"] as? [[String: Any]], "\(shown.text)")
        #expect(storage.count == 3)
        for rendition in storage {
            #expect(abs((rendition["seconds"] as? Double ?? 0) - 8) < 0.2, "\(rendition)")
            #expect(abs((rendition["storedFromStart"] as? Double ?? 0) - 4) < 0.2, "\(rendition)")
            #expect(rendition["storedSeconds"] as? Double == rendition["storedFromStart"] as? Double, "\(rendition)")
        }

        let master = try await h.request(.GET, h.base + "/api/v1/items/four/offline.m3u8")
        #expect(master.status == 200)
        #expect(master.text.contains("/api/v1/items/four/offline/0.m3u8"), "\(master.text)")
        let media = try await h.request(.GET, h.base + "/api/v1/items/four/offline/0.m3u8")
        #expect(media.status == 200)
        let lines = media.text.split(separator: "\n")
        #expect(lines.count { $0.hasPrefix("#EXTINF") } == 2, "two 2-second segments: \(media.text)")
        #expect(lines.last == "#EXT-X-ENDLIST", "\(media.text)")
        #expect(try await h.request(.GET, h.base + "/api/v1/items/four/offline/9.m3u8").status == 404)

        let played = try await Self.decode(h.base + "/api/v1/items/four/offline.m3u8")
        #expect(played.stderr.isEmpty, "an offline player hit a missing segment: \(played.stderr)")
        // Every stream (video variants, audio) stops after 4 of the stream's 8 seconds: about half its frames.
        func counts(_ frames: [String]) -> [Substring: Int] {
            Dictionary(frames.map { ($0.split(separator: ",").first ?? "", 1) }, uniquingKeysWith: +)
        }
        let all = counts(whole.frames)
        let offline = counts(played.frames)
        #expect(!offline.isEmpty && Set(offline.keys) == Set(all.keys), "\(offline) vs \(all)")
        for (stream, count) in offline {
            let share = Double(count) / Double(all[stream] ?? 1)
            #expect(share > 0.4 && share < 0.6, "stream \(stream): \(count) of \(all[stream] ?? 0) frames")
        }
    }
}
