import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import Testing

/// `hlscache fetch` processes killed with SIGKILL at random points, then resumed: every cached file is
/// byte-identical to the origin's and nothing complete is fetched twice.
@Suite(.serialized) struct FetchKillResumeTests {
    private func launch(_ arguments: [String]) throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = CLI.binary
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        return process
    }

    @Test func sigkillAtRandomPointsThenResumeStoresExactOriginBytes() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-kill-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let url = origin.baseURL + "/master.m3u8"
        let common = ["fetch", url, "--cache-dir", cache.path, "--free-disk-cushion", "0", "--id", "killme"]

        // Each run names itself in a header, so a request is counted against the run that made it: a request a killed
        // run sent just before it died can reach a starved test origin only after the next run started.
        func run(_ name: String) -> [String] { ["--origin-header", "127.0.0.1=X-Run: \(name)"] }
        func requests(of name: String) -> [String] {
            origin.requests.filter { $0.headers.contains { $0.0.lowercased() == "x-run" && $0.1 == name } }.map(\.path)
        }
        var completedBefore: Set<String> = []
        for cycle in 0..<3 {
            let process = try launch(common + ["--rate", "100KB"] + run("cycle\(cycle)"))
            // Killed from a plain thread, so a busy cooperative pool cannot delay the kill past the download; through
            // ChildProcess, which never signals a pid it has reaped (the system may have given it to another process).
            let delay = UInt32.random(in: 150_000...900_000)
            Thread.detachNewThread {
                usleep(delay)
                process.signal(SIGKILL)
            }
            await process.waitForExit()
            #expect(
                process.terminationReason == .uncaughtSignal,
                "cycle \(cycle): killed before it finished (exit \(process.terminationStatus))")
            let refetched = requests(of: "cycle\(cycle)").filter { completedBefore.contains($0) }
            #expect(refetched.isEmpty, "cycle \(cycle): complete files fetched again: \(refetched)")
            completedBefore = try storedPaths(cache: cache, origin: origin, dir: dir)
        }

        // The item was left `downloading` by a dead process; the next run resumes it to the end.
        let final = try launch(common + ["--json"] + run("final"))
        await final.waitForExit()
        #expect(final.terminationStatus == 0)
        let refetched = requests(of: "final").filter { completedBefore.contains($0) }
        #expect(refetched.isEmpty, "complete files fetched again: \(refetched)")
        let unnamed = origin.requests.filter { !$0.headers.contains { $0.0.lowercased() == "x-run" } }.map(\.path)
        #expect(unnamed.isEmpty, "every request is counted against its run: \(unnamed)")

        let items = try ItemStore(directory: cache.path)
        let item = try #require(try items.item("killme"))
        #expect(item.state == .cached)
        let files = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String } ?? []
        let segments = files.count { $0.hasSuffix(".ts") }
        #expect(item.segmentsDone == item.segmentsTotal && item.segmentsTotal == segments)
        let stored = try storedPaths(cache: cache, origin: origin, dir: dir)
        #expect(stored.count == files.count { $0.hasSuffix(".ts") || $0.hasSuffix(".m3u8") }, "every playlist and segment")
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.appendingPathComponent("tmp").path).isEmpty)
        await origin.stop()
    }

    /// `hlscache fetch` sends the per-origin headers of the configuration file and of `--origin-header`, to every
    /// request of the item (an origin that wants a token on its playlists and segments); without them the origin's
    /// 403 fails the item.
    @Test func configuredOriginHeadersReachEveryRequestOfAFetch() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let files = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String } ?? []
        for file in files where file.hasSuffix(".ts") || file.hasSuffix(".m3u8") {
            origin.setFault(.requireHeader("X-Token", "t0k"), for: "/" + file)
        }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-headers-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let config = work.appendingPathComponent("hlscache.yaml")
        try "origins:\n  \"127.0.0.1\":\n    headers:\n      X-Token: t0k\n".write(to: config, atomically: true, encoding: .utf8)
        let url = origin.baseURL + "/master.m3u8"
        for (name, extra, expected) in [
            ("none", [String](), Int32(3)), ("file", ["--config", config.path], 0),
            ("flag", ["--origin-header", "127.0.0.1=X-Token: t0k"], 0),
        ] {
            let cache = work.appendingPathComponent(name)
            let process = try launch(["fetch", url, "--cache-dir", cache.path, "--free-disk-cushion", "0", "--seconds", "4"] + extra)
            await process.waitForExit()
            #expect(process.terminationStatus == expected, "\(name)")
            guard expected == 0 else { continue }
            let items = try ItemStore(directory: cache.path)
            #expect(try items.items().first?.state == .partiallyCached, "\(name): the first 4 seconds")
            #expect(try storedPaths(cache: cache, origin: origin, dir: dir).contains { $0.hasSuffix(".ts") }, "\(name): segments stored")
        }
        #expect(!origin.requests.isEmpty)
    }

    /// A prewarmed protected stream whose keys stop being served before the item expires (keys.ttl, 24 h by default,
    /// against `--expires 7d`) gets a note saying offline playback stops then; with `keys.ttl: none` it does not.
    @Test func aKeyServedShorterThanItsItemIsNoted() async throws {
        let dir = try await Streams.stream("aes128-rotation") { try FFmpeg.makeAES128(in: $0) }
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-keynote-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        for (name, ttl, expected) in [("default", nil, true), ("none", "none", false)] {
            let output = work.appendingPathComponent("\(name).out")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let process = ChildProcess()
            process.executableURL = CLI.binary
            process.arguments = [
                "fetch", origin.baseURL + "/index.m3u8", "--cache-dir", work.appendingPathComponent(name).path, "--expires", "7d",
            ]
            var environment = ProcessInfo.processInfo.environment
            environment["HLSCACHE_KEYS_TTL"] = ttl
            process.environment = environment
            process.standardOutput = try FileHandle(forWritingTo: output)
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            await process.waitForExit()
            #expect(process.terminationStatus == 0, "\(name)")
            let text = try String(contentsOf: output, encoding: .utf8)
            #expect(text.contains("note: the stream's keys are served until") == expected, "\(name): \(text)")
        }
    }

    /// Opens the store the killed process used, checks every stored object against the origin's file, and
    /// returns the origin paths stored.
    private func storedPaths(cache: URL, origin: TestOrigin, dir: URL) throws -> Set<String> {
        let store = try CacheStore.open(directory: cache.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        defer { store.close() }
        var paths: Set<String> = []
        let files = FileManager.default.enumerator(atPath: dir.path)?.compactMap { $0 as? String } ?? []
        for file in files where file.hasSuffix(".ts") || file.hasSuffix(".m3u8") {
            let key = CacheKey(try OriginURL(origin.baseURL + "/" + file))
            guard let object = store.lookup(key) else { continue }
            let bytes = FileManager.default.contents(atPath: object.path)
            let original = FileManager.default.contents(atPath: dir.appendingPathComponent(file).path)
            #expect(bytes == original, "\(file) differs from the origin")
            paths.insert("/" + file)
        }
        return paths
    }
}
