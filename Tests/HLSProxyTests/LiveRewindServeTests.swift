import Foundation
import HLSPlaylist
import HLSTestSupport
import Testing

/// Time-shift for viewers (`live.rewindWindow`, docs/fetch.md#live) against a live origin of real segments
/// (``SteppedLiveStream``): AES-128, a key every 4 segments, each segment deleted once out of its 4-segment window.
/// The channel moves a segment a second once the viewer holds its window, so a loaded machine slows it down instead
/// of leaving holes in what the viewer stored. Every wait is for an event, with a generous bound.
@Suite(.serialized) struct LiveRewindServeTests {
    /// A viewer watches through the plain URL, so the server stores the segments; `/rewind/…` then lists, before the
    /// origin's window, segments the origin no longer lists (nor has), and ffmpeg decodes every one of their frames
    /// through the proxy with their keys, none asked of the origin again. The plain URL stays the origin's window, line
    /// for line.
    @Test func aRewindRequestListsSegmentsOlderThanTheOriginsWindowAndTheyPlay() async throws {
        let root = LiveRecordingTests.temporary("live-rewind")
        defer { if ProcessInfo.processInfo.environment["KEEP_LIVE_TEST"] == nil { try? FileManager.default.removeItem(at: root) } }
        let listSize = 4
        let stream = try await SteppedLiveStream(in: root.appendingPathComponent("origin"), listSize: listSize, rotateKeysEvery: 4)
        let origin = TestOrigin(root: stream.dir)
        try await origin.start()
        let config = root.appendingPathComponent("hlscache.yaml")
        try Data("live:\n  rewindWindow: 10m\n".utf8).write(to: config)
        let (serve, base) = try await ServeShutdownTests.serve(
            cache: root.appendingPathComponent("cache"), extra: ["--config", config.path, "--log-level", "debug", "--access-log"],
            stderr: root.appendingPathComponent("serve.log"))
        defer { if serve.isRunning { serve.signal(SIGKILL) } }

        let plainPath = "/http/127.0.0.1:\(origin.port)/live.m3u8"
        let viewed = LiveRecordingTests.Seen()
        stream.step { _ in Set(stream.window).isSubset(of: viewed.get()) }
        let viewer = Task { try await LiveRecordingTests.watch(base + plainPath, base: base, seen: viewed) }
        // Three windows' worth watched: two of them have left the origin's playlist. Then the channel holds still
        // (live, no end) for the checks, and the viewer fetches the whole window it stopped at.
        try await LiveRecordingTests.waitUntil("the viewer watching 12 segments") { viewed.get().count >= 12 }
        stream.hold()
        try await LiveRecordingTests.waitUntil("the viewer holding the window") { Set(stream.window).isSubset(of: viewed.get()) }

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

        // The rewind URL: the same window, after every segment the viewer stored since it joined (the unbroken run
        // of held segments right before the window): at least 12 in all.
        let rewind = try await LiveRecordingTests.http(base + "/rewind" + plainPath)
        #expect(rewind.status == 200)
        let text = String(decoding: rewind.body, as: UTF8.self)
        let media = try Playlist(text).media()
        viewer.cancel()
        _ = await viewer.result
        let windowStart = LiveRecordingTests.originSegments(stream.dir).first?.mediaSequence ?? 0
        let oldest = try #require(media.segments.first)
        #expect(media.isLive && media.segments.count >= 12, "\(text)")
        #expect(zip(media.segments, media.segments.dropFirst()).allSatisfy { $1.mediaSequence == $0.mediaSequence + 1 }, "\(text)")
        #expect(oldest.mediaSequence + 4 <= windowStart, "older than the origin's window: \(text)")
        let names = media.segments.map { String($0.uri.split(separator: "/").last!) }
        let gone = names.prefix(2).filter { !FileManager.default.fileExists(atPath: stream.dir.appendingPathComponent($0).path) }
        #expect(gone.count == 2, "the origin no longer has the oldest ones: \(names.prefix(2))")
        let keyURIs = Set(media.segments.compactMap { $0.key?.uri })
        #expect(keyURIs.count >= 2 && keyURIs.allSatisfy { $0.hasPrefix("/keys/") }, "\(keyURIs)")

        // They play: the listed segments, through the proxy with their keys, in a playlist that ends (ffmpeg would
        // start a live one at its edge), decode frame for frame — 25 a segment.
        try await stream.stop()
        let served = root.appendingPathComponent("served")
        try FileManager.default.createDirectory(at: served, withIntermediateDirectories: true)
        // What the rewind added: the segments before the window of the playlist it was made from (its last
        // `listSize`), each held when listed.
        let older = Array(media.segments.dropLast(listSize))
        let olderNames = older.map { String($0.uri.split(separator: "/").last!) }
        var keptLines: [Substring] = []
        var pending: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("/") {
                if olderNames.contains(String(line.split(separator: "/").last!)) { keptLines += pending + [line] }
                pending = []
            } else if line.hasPrefix("#EXTM3U") || line.hasPrefix("#EXT-X-VERSION") || line.hasPrefix("#EXT-X-TARGETDURATION")
                || line.hasPrefix("#EXT-X-MEDIA-SEQUENCE") || line.hasPrefix("#EXT-X-DISCONTINUITY-SEQUENCE")
            {
                keptLines.append(line)
            } else if !line.isEmpty {
                pending.append(line)
            }
        }
        let olderText = keptLines.joined(separator: "\n")
        let absolute =
            olderText.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
                if line.hasPrefix("/") { return base + line }
                return String(line).replacingOccurrences(of: "URI=\"/", with: "URI=\"" + base + "/")
            }.joined(separator: "\n") + "\n#EXT-X-ENDLIST\n"
        try Data(absolute.utf8).write(to: served.appendingPathComponent("rewind.m3u8"))
        let player = TestOrigin(root: served)
        try await player.start()
        // Counted for the played segments only: a fetch the viewer left in flight (finished in the background, or a
        // read-ahead of its last playlist) may still reach the origin now, and is no answer to this player.
        let olderPaths = Set(olderNames.map { "/" + $0 })
        let before = origin.requests.filter { olderPaths.contains($0.path) }.count
        let frames = try await FFmpeg.frameMD5(player.baseURL + "/rewind.m3u8")
        #expect(older.count >= 8)
        #expect(frames.count == older.count * 25, "\(frames.count) frames for \(older.count) segments")
        #expect(origin.requests.filter { olderPaths.contains($0.path) }.count == before, "played from the cache")
        let asked = origin.requests.filter { $0.path.hasPrefix("/seg") }
        // Each segment was asked of the origin once, polling `/rewind/…` or not (the same playlist: no variant switch
        // for read-ahead, ReadAheadTests), and the viewer got every one the channel listed.
        let twice = Dictionary(grouping: asked, by: \.path).filter { $0.value.count > 1 }
        let listed = Set((0...stream.newest).map { String(format: "seg%05d.ts", $0) })
        #expect(listed.isSubset(of: viewed.get()), "the viewer missed \(listed.subtracting(viewed.get()).sorted())")
        #expect(
            twice.isEmpty,
            Comment(
                rawValue:
                    "the viewer's segments asked of the origin more than once: \(twice.mapValues { $0.count })\n"
                    + LiveRecordingTests.serveLog(root.appendingPathComponent("serve.log"), about: Array(twice.keys))))
        await player.stop()
        await origin.stop()
        serve.signal(SIGTERM)
        await serve.waitForExit()
    }

    /// A multivariant playlist asked for under `/rewind` names its variant, rendition and I-frame playlists at their
    /// `/rewind/…` URLs (the plain one keeps the plain form); the variant followed from it is the extended media
    /// playlist, and ffmpeg given only the multivariant rewind URL decodes every segment it lists, the ones the
    /// origin no longer has included.
    @Test func aRewoundMultivariantPlaylistPointsEveryRenditionAtItsRewindURL() async throws {
        let root = LiveRecordingTests.temporary("live-rewind-master")
        defer { try? FileManager.default.removeItem(at: root) }
        let stream = try await SteppedLiveStream(in: root.appendingPathComponent("origin"), listSize: 4, rotateKeysEvery: 4)
        // Played by ffmpeg: one variant. Read only: a rendition and an I-frame playlist besides.
        try Data("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=300000,RESOLUTION=160x90\nlive.m3u8\n".utf8)
            .write(to: stream.dir.appendingPathComponent("master.m3u8"))
        try Data(
            """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="main",DEFAULT=YES,URI="live.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=300000,AUDIO="aud"
            live.m3u8
            #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=50000,URI="iframes.m3u8"

            """.utf8
        ).write(to: stream.dir.appendingPathComponent("renditions.m3u8"))
        let origin = TestOrigin(root: stream.dir)
        try await origin.start()
        let config = root.appendingPathComponent("hlscache.yaml")
        try Data("live:\n  rewindWindow: 10m\n".utf8).write(to: config)
        let (serve, base) = try await ServeShutdownTests.serve(
            cache: root.appendingPathComponent("cache"), extra: ["--config", config.path], stderr: root.appendingPathComponent("serve.log"))
        defer { if serve.isRunning { serve.signal(SIGKILL) } }

        let proxied = "/http/127.0.0.1:\(origin.port)/"
        let viewed = LiveRecordingTests.Seen()
        stream.step { _ in Set(stream.window).isSubset(of: viewed.get()) }
        let viewer = Task { try await LiveRecordingTests.watch(base + proxied + "live.m3u8", base: base, seen: viewed) }
        try await LiveRecordingTests.waitUntil("the viewer watching 12 segments") { viewed.get().count >= 12 }
        // No new segments from here on, and no EXT-X-ENDLIST: the playlist stays live, its list fixed; the viewer
        // watches to its end, so the cache holds every segment from the first it watched.
        await stream.kill()
        let last = LiveRecordingTests.originSegments(stream.dir).map { String($0.uri.split(separator: "/").last!) }
        #expect(last.count == 4, "the origin's last window: \(last)")
        try await LiveRecordingTests.waitUntil("the viewer watching the last window") { viewed.get().isSuperset(of: last) }
        viewer.cancel()
        _ = await viewer.result

        // Under /rewind: every playlist it names at its rewind URL. The plain URL: the plain form. The plain one
        // first, so the rewind one is made from the stored copy, and the plain one again, unchanged by it.
        for (prefix, label) in [(proxied, "plain"), ("/rewind" + proxied, "rewind"), (proxied, "plain again")] {
            let (status, body) = try await LiveRecordingTests.http(base + prefix + "renditions.m3u8")
            #expect(status == 200)
            let text = String(decoding: body, as: UTF8.self)
            let master = try Playlist(text).master()
            let uris = master.variants.map(\.uri) + master.renditions.compactMap(\.uri) + master.iFrameVariants.map(\.uri)
            #expect(uris == [prefix + "live.m3u8", prefix + "live.m3u8", prefix + "iframes.m3u8"], "\(label): \(text)")
        }

        // The variant followed from the rewind URL: the extended media playlist, segments and keys in their plain form.
        let (status, body) = try await LiveRecordingTests.http(base + "/rewind" + proxied + "master.m3u8")
        #expect(status == 200)
        let variant = try #require(try Playlist(String(decoding: body, as: UTF8.self)).master().variants.first?.uri)
        #expect(variant == "/rewind" + proxied + "live.m3u8")
        let extended = try await LiveRecordingTests.http(base + variant)
        let text = String(decoding: extended.body, as: UTF8.self)
        let media = try Playlist(text).media()
        let windowNow = LiveRecordingTests.originSegments(stream.dir)
        let oldest = try #require(media.segments.first)
        #expect(media.isLive && media.segments.count >= 8, "\(text)")
        #expect(oldest.mediaSequence + 4 <= (windowNow.first?.mediaSequence ?? 0), "older than the origin's window: \(text)")
        #expect(media.segments.allSatisfy { $0.uri.hasPrefix(proxied) }, "\(text)")
        #expect(media.segments.allSatisfy { $0.key?.uri?.hasPrefix("/keys/") ?? false }, "\(text)")
        let names = media.segments.map { String($0.uri.split(separator: "/").last!) }
        #expect(!FileManager.default.fileExists(atPath: stream.dir.appendingPathComponent(names[0]).path), "gone from the origin")

        // ffmpeg given the multivariant rewind URL, from the start of what it lists (it would join a live playlist at
        // its edge) until the list stops growing: every listed segment, 25 frames each.
        // Counted for the listed segments only (a read-ahead of the viewer's may still reach the origin for others).
        let listedPaths = Set(names.map { "/" + $0 })
        let before = origin.requests.filter { listedPaths.contains($0.path) }.count
        let frames = try await FFmpeg.frameMD5(
            base + "/rewind" + proxied + "master.m3u8", extraArguments: ["-live_start_index", "0", "-m3u8_hold_counters", "3"])
        #expect(frames.count == names.count * 25, "\(frames.count) frames for \(names.count) segments")
        #expect(origin.requests.filter { listedPaths.contains($0.path) }.count == before, "played from the cache")
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
