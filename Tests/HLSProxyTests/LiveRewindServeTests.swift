import Foundation
import HLSPlaylist
import HLSTestSupport
import Testing

/// Time-shift for viewers (`live.rewindWindow`, docs/fetch.md#live) against a real live origin: ffmpeg writing AES-128
/// HLS in real time, a key every 4 segments, deleting each segment once out of its 4-segment window. Every wait is
/// for an event, with a generous bound.
@Suite(.serialized) struct LiveRewindServeTests {
    /// A viewer watches through the plain URL, so the server stores the segments; `/rewind/…` then lists, before the
    /// origin's window, segments the origin no longer lists (nor has), and ffmpeg decodes every one of their frames
    /// through the proxy with their keys, none asked of the origin again. The plain URL stays the origin's window, line
    /// for line.
    @Test func aRewindRequestListsSegmentsOlderThanTheOriginsWindowAndTheyPlay() async throws {
        let root = LiveRecordingTests.temporary("live-rewind")
        defer { try? FileManager.default.removeItem(at: root) }
        let stream = try LiveStream(in: root.appendingPathComponent("origin"), listSize: 4, rotateKeysEvery: 4)
        let origin = TestOrigin(root: stream.dir)
        try await origin.start()
        try await LiveRecordingTests.waitUntil("the live playlist") { LiveRecordingTests.originSegments(stream.dir).count >= 2 }
        let config = root.appendingPathComponent("hlscache.yaml")
        try Data("live:\n  rewindWindow: 10m\n".utf8).write(to: config)
        let (serve, base) = try await ServeShutdownTests.serve(
            cache: root.appendingPathComponent("cache"), extra: ["--config", config.path], stderr: root.appendingPathComponent("serve.log"))
        defer { if serve.isRunning { serve.signal(SIGKILL) } }

        let plainPath = "/http/127.0.0.1:\(origin.port)/live.m3u8"
        let viewed = LiveRecordingTests.Seen()
        let viewer = Task { try await LiveRecordingTests.watch(base + plainPath, base: base, seen: viewed) }
        // Three windows' worth watched: two of them have left the origin's playlist.
        try await LiveRecordingTests.waitUntil("the viewer watching 12 segments") { viewed.get().count >= 12 }
        viewer.cancel()
        _ = await viewer.result

        // The plain URL: the origin's window as the origin wrote it (only URIs rewritten), whichever reading it is.
        var plainMatched = false
        var lastPlain = ""
        for _ in 0..<240 where !plainMatched {
            let originText = (try? String(contentsOf: stream.dir.appendingPathComponent("live.m3u8"), encoding: .utf8)) ?? ""
            let (status, body) = try await LiveRecordingTests.http(base + plainPath)
            #expect(status == 200)
            lastPlain = String(decoding: body, as: UTF8.self)
            plainMatched = Self.structure(of: lastPlain) == Self.structure(of: originText)
            if !plainMatched { try await Task.sleep(for: .milliseconds(250)) }
        }
        #expect(plainMatched, "the plain URL is the origin's window: \(lastPlain)")
        #expect(try Playlist(lastPlain).media().segments.count == 4)

        // The rewind URL: the same window, after the segments held from before it.
        let rewind = try await LiveRecordingTests.http(base + "/rewind" + plainPath)
        #expect(rewind.status == 200)
        let text = String(decoding: rewind.body, as: UTF8.self)
        let media = try Playlist(text).media()
        let windowNow = LiveRecordingTests.originSegments(stream.dir)
        let oldest = try #require(media.segments.first)
        #expect(media.isLive && media.segments.count >= 8, "\(text)")
        #expect(zip(media.segments, media.segments.dropFirst()).allSatisfy { $1.mediaSequence == $0.mediaSequence + 1 }, "\(text)")
        #expect(oldest.mediaSequence + 4 <= (windowNow.first?.mediaSequence ?? 0), "older than the origin's window: \(text)")
        let names = media.segments.map { String($0.uri.split(separator: "/").last!) }
        let gone = names.prefix(2).filter { !FileManager.default.fileExists(atPath: stream.dir.appendingPathComponent($0).path) }
        #expect(gone.count == 2, "the origin no longer has the oldest ones: \(names.prefix(2))")
        let keyURIs = Set(media.segments.compactMap { $0.key?.uri })
        #expect(keyURIs.count >= 2 && keyURIs.allSatisfy { $0.hasPrefix("/keys/") }, "\(keyURIs)")

        // They play: the listed segments, through the proxy with their keys, in a playlist that ends (ffmpeg would
        // start a live one at its edge), decode frame for frame — 25 a segment.
        await stream.stop()
        let served = root.appendingPathComponent("served")
        try FileManager.default.createDirectory(at: served, withIntermediateDirectories: true)
        let absolute =
            text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
                if line.hasPrefix("/") { return base + line }
                return String(line).replacingOccurrences(of: "URI=\"/", with: "URI=\"" + base + "/")
            }.joined(separator: "\n") + "\n#EXT-X-ENDLIST\n"
        try Data(absolute.utf8).write(to: served.appendingPathComponent("rewind.m3u8"))
        let player = TestOrigin(root: served)
        try await player.start()
        let before = origin.requests.filter { $0.path.hasPrefix("/seg") }.count
        let frames = try await FFmpeg.frameMD5(player.baseURL + "/rewind.m3u8")
        #expect(frames.count == names.count * 25, "\(frames.count) frames for \(names.count) segments")
        let asked = origin.requests.filter { $0.path.hasPrefix("/seg") }
        #expect(asked.count == before, "played from the cache")
        #expect(Dictionary(grouping: asked, by: \.path).values.allSatisfy { $0.count == 1 }, "each segment asked of the origin once")
        await player.stop()
        await origin.stop()
        serve.signal(SIGTERM)
        await serve.waitForExit()
    }

    /// A playlist's lines with each URI reduced to its last path component (the proxy rewrites URIs only).
    static func structure(of text: String) -> [String] {
        text.split(separator: "\n").map { line -> String in
            let line = String(line)
            guard line.hasPrefix("#") else { return String(line.split(separator: "/").last ?? "") }
            guard line.hasPrefix("#EXT-X-KEY"), let start = line.range(of: "URI=\""),
                let end = line[start.upperBound...].firstIndex(of: "\"")
            else { return line }
            let name: String = line[start.upperBound..<end].split(separator: "/").last.map(String.init) ?? ""
            return String(line[..<start.upperBound]) + name + String(line[end...])
        }
    }
}
