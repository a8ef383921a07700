import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HLSTestSupport
import Testing

/// `hlscache fetch --poster-only` and `rm --keep-metadata` with a poster, on the real binary, a real origin and a
/// running `serve` on the same cache directory that serves the poster (docs/cli.md).
@Suite struct PosterCLITests {
    private static func startServe(cache: URL) async throws -> (ChildProcess, String) {
        try await CLI.startServe(cache: cache.path)
    }

    /// Status, `X-Cache` and body of a GET.
    private static func get(_ url: String) async throws -> (Int, String?, Data) {
        let (data, response) = try await URLSession.shared.data(from: URL(string: url)!)
        let http = response as? HTTPURLResponse
        return (http?.statusCode ?? 0, http?.value(forHTTPHeaderField: "X-Cache"), data)
    }

    @Test func posterOnlyStoresThePosterAloneAndRmKeepMetadataKeepsIt() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-poster-origin-\(UUID().uuidString)")
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-poster-\(UUID().uuidString)")
        defer {
            try? FileManager.default.removeItem(at: dir)
            try? FileManager.default.removeItem(at: cache)
        }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let poster = Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        try poster.write(to: dir.appendingPathComponent("poster.jpg"))
        try Data("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\ns0.ts\n#EXT-X-ENDLIST\n".utf8).write(
            to: dir.appendingPathComponent("s.m3u8"))
        try Data(repeating: 0x47, count: 9400).write(to: dir.appendingPathComponent("s0.ts"))
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let stream = origin.baseURL + "/s.m3u8"
        let posterURL = origin.baseURL + "/poster.jpg"

        let missing = try await CLI.run(["fetch", stream, "--poster-only", "--cache-dir", cache.path])
        #expect(missing.status == 64, "\(missing.stderr)")
        #expect(missing.stderr.contains("--poster"))

        let fetched = try await CLI.run(["fetch", stream, "--poster", posterURL, "--poster-only", "--id", "po", "--cache-dir", cache.path])
        #expect(fetched.status == 0, "\(fetched.stderr)")
        #expect(fetched.stdout.contains("po: ready, poster stored"), "\(fetched.stdout)")
        #expect(origin.hits("/poster.jpg") == 1)
        #expect(origin.hits("/s.m3u8") == 0, "nothing of the stream")

        let shown = try await CLI.run(["show", "po", "--json", "--cache-dir", cache.path])
        let object = try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any]
        #expect(object?["state"] as? String == "ready", "\(shown.stdout)")

        // Deleted keeping the record (no server running: what a fresh one serves is what is on disk): the poster stays.
        let kept = try await CLI.run(["rm", "po", "--keep-metadata", "--cache-dir", cache.path])
        #expect(kept.status == 0, "\(kept.stderr)")
        var (process, base) = try await Self.startServe(cache: cache)
        defer { if process.isRunning { process.terminate() } }
        let path = "/http/127.0.0.1:\(origin.port)/poster.jpg"
        let (status, cacheHeader, body) = try await Self.get(base + path)
        #expect(status == 200 && body == poster)
        #expect(cacheHeader?.hasPrefix("HIT") == true, "\(cacheHeader ?? "none")")
        #expect(origin.hits("/poster.jpg") == 1)
        let (_, _, itemData) = try await Self.get(base + "/api/v1/items/po")
        let item = try JSONSerialization.jsonObject(with: itemData) as? [String: Any]
        #expect(item?["state"] as? String == "deleted")
        #expect(item?["posterPath"] as? String == path)
        process.terminate()
        await process.waitForExit()

        // Removed: the poster goes with the record (a fresh server misses it and asks the origin again).
        let removed = try await CLI.run(["rm", "po", "--cache-dir", cache.path])
        #expect(removed.status == 0, "\(removed.stderr)")
        (process, base) = try await Self.startServe(cache: cache)
        let (_, afterRemove, _) = try await Self.get(base + path)
        #expect(afterRemove?.hasPrefix("HIT") != true, "\(afterRemove ?? "none")")
        #expect(origin.hits("/poster.jpg") == 2)
        process.terminate()
        await process.waitForExit()
        await origin.stop()
    }
}
