import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSKeys
import HLSTestSupport
import Testing

/// `hlscache fetch --seconds N` against ffmpeg streams on a real origin: exactly the first N seconds of every
/// rendition (plus playlists, maps and keys) are stored, and a player can play them with the origin gone.
@Suite(.serialized) struct FetchPrecacheTests {
    /// Segment URIs whose start time is before `seconds`, computed independently of the engine.
    static func segmentsStartingBefore(_ seconds: Double, playlist: URL) throws -> [String] {
        var start = 0.0
        var duration: Double?
        var result: [String] = []
        for line in try String(contentsOf: playlist, encoding: .utf8).split(separator: "\n") {
            if line.hasPrefix("#EXTINF:") {
                duration = Double(line.dropFirst(8).split(separator: ",")[0])
            } else if !line.hasPrefix("#"), let d = duration {
                if start < seconds { result.append(String(line)) }
                start += d
                duration = nil
            }
        }
        return result
    }

    @Test func fourSecondsOfEveryRenditionPlayOfflineThenTheRestAfterTheOriginReturns() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.startBelowTheEphemeralRange()  // started again on its port below
        let port = origin.port
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/master.m3u8", seconds: 4)
        #expect(item.state == .partiallyCached)
        #expect(item.errorCode == nil)

        // Exactly the segments starting before 4 s, in every rendition, and every playlist.
        var expectedPaths: Set<String> = ["/master.m3u8"]
        for rendition in ["v0", "v1", "venglish"] {
            expectedPaths.insert("/\(rendition)/index.m3u8")
            let wanted = try Self.segmentsStartingBefore(4, playlist: dir.appendingPathComponent("\(rendition)/index.m3u8"))
            if rendition != "venglish" { #expect(wanted.count == 2, "2 s segments: two start before 4 s in \(rendition)") }
            for segment in wanted { expectedPaths.insert("/\(rendition)/\(segment)") }
            let all = try Self.segmentsStartingBefore(1000, playlist: dir.appendingPathComponent("\(rendition)/index.m3u8"))
            for segment in all where !wanted.contains(segment) {
                #expect(try fetch.stored("/\(rendition)/\(segment)") == nil, "\(rendition)/\(segment) starts after 4 s")
            }
        }
        for path in expectedPaths {
            let stored = try #require(try fetch.stored(path), "\(path) is cached")
            let original = try [UInt8](Data(contentsOf: dir.appendingPathComponent(String(path.dropFirst()))))
            #expect(stored == original, "\(path) byte-identical")
        }
        let requested = Set(origin.requests.map(\.path))
        #expect(requested == expectedPaths, "the origin saw exactly the planned resources")
        #expect(origin.requests.count == expectedPaths.count, "each fetched once")
        #expect(fetch.store.lookup(try fetch.key("/master.m3u8"))?.kind == .playlist)
        #expect(fetch.store.lookup(try fetch.key("/v0/seg000.ts"))?.kind == .segment)

        // Reference decodes while the origin is up.
        let directFirst = try await FFmpeg.frameMD5(origin.baseURL + "/master.m3u8", extraArguments: ["-t", "3.9"])
        let directAll = try await FFmpeg.frameMD5(origin.baseURL + "/master.m3u8")
        #expect(directFirst.count > 50 && directAll.count > directFirst.count)
        await fetch.shutdown(keepingCache: true)

        // The origin goes away; a proxy on the same cache directory serves the first 4 s.
        await origin.stop()
        let proxy = try await ProxyHarness.start(origin: TestOrigin(root: dir)) { $0.cacheDirectory = fetch.cacheDirectory.path }
        let master = "\(proxy.base)/http/127.0.0.1:\(port)/master.m3u8"
        let offline = try await FFmpeg.frameMD5(master, extraArguments: ["-t", "3.9"])
        #expect(offline == directFirst, "the first 3.9 s decode identically with the origin stopped")

        // Past the precached part it fails clearly: the proxy answers 502/504 for the next segment.
        let next = try await proxy.get("\(proxy.base)/http/127.0.0.1:\(port)/v0/seg002.ts")
        #expect(next.status == 502 || next.status == 504)
        #expect(next.text.contains("\"error\""))
        let partial = try? await FFmpeg.frameMD5(master)
        #expect(partial != directAll, "the whole stream cannot play offline")

        // The origin comes back on the same address: the whole stream plays.
        try await origin.start(port: port)
        let online = try await FFmpeg.frameMD5(master)
        #expect(online == directAll)
        await proxy.shutdown()
        await origin.stop()
        try? FileManager.default.removeItem(at: fetch.cacheDirectory)
    }

    /// With the key store (as `hlscache fetch` and `serve` run), prewarmed keys are sealed in keys.sqlite:
    /// never a plain object, never 16 plaintext bytes anywhere under the cache dir.
    @Test func prewarmedKeysGoToTheSealedKeyStore() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8", seconds: 4)
        #expect(item.state == .partiallyCached)
        let keys = fetch.keys
        let id = keys.id(for: try OriginURL(fetch.url("/keys/key0.key")))
        #expect(try keys.record(id)?.isStored == true)
        #expect(try fetch.stored("/keys/key0.key") == nil, "no plain key object")
        let plain = [UInt8](try Data(contentsOf: aes.appendingPathComponent("keys/key0.key")))
        #expect(!anyFile(under: fetch.cacheDirectory, contains: plain))
        await fetch.shutdown()
        await origin.stop()
    }

    /// Every downloaded AES-128 segment is checked by decrypting its last block: a damaged one fails the item
    /// with `corrupted` and is not kept; intact ones pass.
    @Test func damagedAES128SegmentIsCaughtAtDownloadTime() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        var damaged = [UInt8](try Data(contentsOf: aes.appendingPathComponent("p0/seg001.ts")))
        // The last byte of the next-to-last cipher block: in CBC it flips the last plaintext byte exactly, so the
        // padding byte (1…16) becomes 0x4A…0x5B and can never pass. (Flipping the last cipher byte scrambled the
        // whole last block, which had a 1-in-256 chance of still ending in valid padding: a flaky test.)
        damaged[damaged.count - 17] ^= 0x5A
        origin.setBody(damaged, contentType: "video/mp2t", for: "/p0/seg001.ts")
        // The damaged segment is answered only once the intact one is stored: its failure ends the item, and a
        // transfer still running then is not kept (in a loaded run the intact segment was, once).
        origin.setFault(.held, for: "/p0/seg001.ts")
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        async let fetched = fetch.fetch("/index.m3u8", seconds: 4)
        try await waitUntil("the intact segment stored") { try fetch.stored("/p0/seg000.ts") != nil }
        origin.releasePattern("/p0/seg001.ts")
        let item = try await fetched
        #expect(item.state == .failed)
        #expect(item.errorCode == "corrupted")
        #expect(try fetch.stored("/p0/seg001.ts") == nil, "the damaged segment was kept")
        #expect(try fetch.stored("/p0/seg000.ts") != nil, "the intact segment passed the check")
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func mapsAndKeysOfTheSelectedSegmentsAreStored() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8", seconds: 4)
        #expect(item.state == .partiallyCached)
        // Keys rotate every 2 segments: only key0 covers the first 4 s (keys go to the sealed key store).
        let key0 = fetch.keys.id(for: try OriginURL(fetch.url("/keys/key0.key")))
        let key1 = fetch.keys.id(for: try OriginURL(fetch.url("/keys/key1.key")))
        #expect(try fetch.keys.storedKey(key0)?.count == 16)
        #expect(try fetch.keys.record(key1)?.isStored != true)
        #expect(try fetch.stored("/p0/seg000.ts") != nil && fetch.stored("/p0/seg001.ts") != nil)
        #expect(try fetch.stored("/p1/seg000.ts") == nil)
        await fetch.shutdown()
        await origin.stop()

        let fmp4 = try await Streams.stream("fmp4", { try FFmpeg.makeFMP4(in: $0) })
        let origin2 = TestOrigin(root: fmp4)
        try await origin2.start()
        let fetch2 = try DownloaderHarness(origin: origin2)
        defer { Task { await fetch2.shutdown() } }
        let whole = try await fetch2.fetch("/index.m3u8", seconds: 0)
        #expect(whole.state == .cached)
        #expect(fetch2.store.lookup(try fetch2.key("/init.mp4"))?.kind == .initSection)
        #expect(whole.segmentsDone == whole.segmentsTotal && whole.segmentsTotal == 3)
        #expect(whole.bytesDone == whole.bytesTotal)
        await fetch2.shutdown()
        await origin2.stop()
    }

    @Test func byteRangeSegmentsStoreTheWholeFileOnce() async throws {
        let dir = try await Streams.stream("byterange", { try FFmpeg.makeByteRange(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8", seconds: 2)
        #expect(item.state == .partiallyCached)
        let original = try [UInt8](Data(contentsOf: dir.appendingPathComponent("index.ts")))
        #expect(try fetch.stored("/index.ts") == original)
        #expect(origin.requests(matching: "/index.ts").count == 1)
        #expect(origin.requests(matching: "/index.ts").allSatisfy { request in !request.headers.contains { $0.0.lowercased() == "range" } })
        await fetch.shutdown()
        await origin.stop()
    }

    /// A master behind a redirect (a CDN sending `/watch/x.m3u8` to the stream's directory) names its renditions
    /// relative to the URL that answered. The stored copy remembers that URL: a proxy serving the prewarmed master
    /// and a second prewarm reading it resolve the renditions where the first prewarm found them, not next to the
    /// redirecting URL (where the origin has nothing).
    @Test func aPrewarmedMasterBehindARedirectResolvesAgainstTheURLThatAnswered() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        origin.setFault(.redirect(to: "/master.m3u8"), for: "/watch/master.m3u8")
        try await origin.start()
        let port = origin.port
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let first = try await fetch.fetch("/watch/master.m3u8", seconds: 4)
        #expect(first.state == .partiallyCached)
        #expect(fetch.store.lookup(try fetch.key("/watch/master.m3u8"))?.location == fetch.url("/master.m3u8"))
        #expect(fetch.store.lookup(try fetch.key("/v0/seg000.ts")) != nil)

        // A second item reads the stored master and plans from it.
        let second = try await fetch.fetch("/watch/master.m3u8", seconds: 6)
        #expect(second.state == .partiallyCached)
        #expect(second.errorCode == nil)
        #expect(origin.requests.allSatisfy { !$0.path.hasPrefix("/watch/v") }, "nothing asked next to the redirecting URL")
        let direct = try await FFmpeg.frameMD5(origin.baseURL + "/master.m3u8", extraArguments: ["-t", "3.9"])
        await fetch.shutdown(keepingCache: true)

        // Offline, a proxy on the same cache serves the prewarmed master with the renditions where they are.
        await origin.stop()
        let proxy = try await ProxyHarness.start(origin: TestOrigin(root: dir)) { $0.cacheDirectory = fetch.cacheDirectory.path }
        let master = "\(proxy.base)/http/127.0.0.1:\(port)/watch/master.m3u8"
        let text = try await proxy.get(master).text
        #expect(text.contains("/http/127.0.0.1:\(port)/v0/index.m3u8"), "rendition resolved against the redirect target")
        #expect(!text.contains("/watch/v0"))
        let offline = try await FFmpeg.frameMD5(master, extraArguments: ["-t", "3.9"])
        #expect(offline == direct, "the first 3.9 s decode identically with the origin stopped")
        await proxy.shutdown()
    }

    /// A language the stream does not have is reported to the user with the plan (the CLI prints a `note:`).
    @Test func aLanguageTheStreamLacksIsReported() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let selection = try RenditionSelection(variants: "worst", audio: "de", subtitles: "all", iFrames: false)
        let item = try await fetch.fetch("/master.m3u8", id: "german", seconds: 2, selection: selection)
        #expect(item.state == .partiallyCached)
        let notes = fetch.events.compactMap { event -> String? in
            if case .note(let id, let message) = event, id == "german" { return message }
            return nil
        }
        #expect(notes == ["--audio de matches no audio rendition of the chosen variants (they have: en); none is downloaded"])
        #expect(!origin.requests.contains { $0.path.hasPrefix("/venglish/") })
        await fetch.shutdown()
        await origin.stop()
    }
}
