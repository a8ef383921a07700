import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import Testing

/// Issue 25, "interrupted, not failed": the origin stops in the middle of a download → the item is `idle` with
/// the error as its reason and a next attempt → the origin comes back on the same port → the item ends `cached`
/// with no command given, under the real `hlscache serve` and under a foreground `hlscache fetch`. Every wait is
/// for a state, bounded generously; the short retry intervals come from the configuration file.
@Suite(.serialized) struct OriginOutageTests {
    static let segments = 8

    /// A VOD stream of 8 segments of 60 kB; every segment but the first stalls after its first 4 KiB until the
    /// outage closes its connection, so the origin is always stopped while they are in flight, after the first is
    /// stored, however slow the machine (a slowed but finite body let a loaded run cache them all first).
    private static func makeOrigin() async throws -> (TestOrigin, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-outage-origin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
        for index in 0..<segments {
            playlist += "#EXTINF:2.0,\ns\(index).ts\n"
            try Data((0..<60_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }).write(to: dir.appendingPathComponent("s\(index).ts"))
        }
        playlist += "#EXT-X-ENDLIST\n"
        try Data(playlist.utf8).write(to: dir.appendingPathComponent("vod.m3u8"))
        let origin = TestOrigin(root: dir)
        try await origin.start()
        slow(origin, true)
        return (origin, dir)
    }

    private static func slow(_ origin: TestOrigin, _ on: Bool) {
        for index in 1..<segments { origin.setFault(on ? .stallAfter(bytes: 4096) : nil, for: "/s\(index).ts") }
    }

    /// Short waits between tries of an idle item, and between attempts, for the test.
    private static func writeConfig(in work: URL) throws -> URL {
        let config = work.appendingPathComponent("hlscache.yaml")
        try """
        downloads:
          retryBaseDelay: 50ms
          retryMaxDelay: 200ms
          idleRetryInterval: 1s
          idleRetryMaxInterval: 2s
        """.write(to: config, atomically: true, encoding: .utf8)
        return config
    }

    private static func item(_ id: String, cache: URL) throws -> DownloadItem? {
        guard FileManager.default.fileExists(atPath: cache.appendingPathComponent("items.sqlite").path) else { return nil }
        return try ItemStore(directory: cache.path).item(id)
    }

    /// Polls the item until `check` holds, at most `timeout` (a bound, not a measurement).
    private static func waitFor(
        _ what: String, _ id: String, cache: URL, timeout: Duration = .seconds(300), _ check: (DownloadItem) -> Bool
    ) async throws -> DownloadItem {
        let deadline = ContinuousClock.now + timeout
        var last: DownloadItem?
        while ContinuousClock.now < deadline {
            if let item = try? item(id, cache: cache) {
                last = item
                if check(item) { return item }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw OutageTestFailure(
            description: "timed out waiting for \(what); item: \(last.map { "\($0.state) \($0.errorCode ?? "-")" } ?? "none")")
    }

    /// Every stored playlist and segment equals the origin's; returns how many segments are stored.
    private static func storedSegments(cache: URL, origin: TestOrigin, dir: URL) throws -> Int {
        let store = try CacheStore.open(directory: cache.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        defer { store.close() }
        var count = 0
        for file in ["vod.m3u8"] + (0..<segments).map({ "s\($0).ts" }) {
            guard let object = store.lookup(CacheKey(try OriginURL(origin.baseURL + "/" + file))) else { continue }
            #expect(
                FileManager.default.contents(atPath: object.path)
                    == FileManager.default.contents(atPath: dir.appendingPathComponent(file).path))
            if file.hasSuffix(".ts") { count += 1 }
        }
        return count
    }

    /// Binds `port` (0: any) on 127.0.0.1 without listening: connections to it are refused, and no other test's
    /// server can take it meanwhile. Returns the socket and its port; close the socket to free the port.
    static func reserve(port: Int = 0) -> (socket: Int32, port: Int)? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            close(fd)
            return nil
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Stops the origin and keeps its port bound (refusing connections) until `restart` brings it back there.
    private static func outage(_ origin: TestOrigin) async -> Int32? {
        let port = origin.port
        await origin.stop()
        return reserve(port: port)?.socket
    }

    private static func restart(_ origin: TestOrigin, reserved: Int32?) async throws {
        if let reserved { close(reserved) }
        slow(origin, false)
        try await origin.start(port: origin.port)
    }

    private static func isWaiting(_ item: DownloadItem) -> Bool {
        item.state == .idle && item.nextAttemptAt != nil && item.interruptedAt != nil && item.errorMessage != nil
            && ["network", "timeout", "http"].contains(item.errorCode ?? "")
    }

    @Test func serveRetriesAnItemInterruptedByAnOriginOutageUntilItIsCached() async throws {
        let (origin, dir) = try await Self.makeOrigin()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-outage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: work)
            try? FileManager.default.removeItem(at: dir)
        }
        let cache = work.appendingPathComponent("cache")
        let config = try Self.writeConfig(in: work)
        let queued = try await ServeShutdownTests.run([
            "fetch", origin.baseURL + "/vod.m3u8", "--detach", "--id", "outage", "--cache-dir", cache.path,
        ])
        #expect(queued.status == 0)
        let (serve, _) = try await ServeShutdownTests.serve(
            cache: cache, extra: ["--config", config.path], stderr: work.appendingPathComponent("serve.log"))
        defer { if serve.isRunning { serve.terminate() } }

        _ = try await Self.waitFor("the first segment", "outage", cache: cache) { $0.state == .downloading && $0.segmentsDone >= 1 }
        let reserved = await Self.outage(origin)
        let waiting = try await Self.waitFor("idle with a reason", "outage", cache: cache, Self.isWaiting)
        #expect(waiting.segmentsDone < Self.segments)

        try await Self.restart(origin, reserved: reserved)
        let cached = try await Self.waitFor("cached with no command given", "outage", cache: cache) { $0.state == .cached }
        #expect(cached.segmentsDone == Self.segments && cached.errorCode == nil && cached.nextAttemptAt == nil)
        #expect(cached.completedAt != nil && cached.startedAt != nil)
        serve.terminate()
        await serve.waitForExit()
        #expect(try Self.storedSegments(cache: cache, origin: origin, dir: dir) == Self.segments)
        await origin.stop()
    }

    @Test func aForegroundFetchWaitsForTheOriginAndCompletes() async throws {
        let (origin, dir) = try await Self.makeOrigin()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-outage-fg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: work)
            try? FileManager.default.removeItem(at: dir)
        }
        let cache = work.appendingPathComponent("cache")
        let config = try Self.writeConfig(in: work)
        let output = work.appendingPathComponent("fetch.out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let fetch = ChildProcess()
        fetch.executableURL = CLI.binary
        fetch.arguments = [
            "fetch", origin.baseURL + "/vod.m3u8", "--id", "fg", "--cache-dir", cache.path, "--free-disk-cushion", "0", "--config",
            config.path,
        ]
        fetch.standardOutput = try FileHandle(forWritingTo: output)
        fetch.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try fetch.run()
        defer { if fetch.isRunning { fetch.terminate() } }

        _ = try await Self.waitFor("the first segment", "fg", cache: cache) { $0.state == .downloading && $0.segmentsDone >= 1 }
        let reserved = await Self.outage(origin)
        _ = try await Self.waitFor("idle with a reason", "fg", cache: cache, Self.isWaiting)
        try await waitUntil("fetch to print that it is waiting for the origin", interval: .milliseconds(100)) {
            try String(contentsOf: output, encoding: .utf8).contains("waiting for the origin")
        }
        #expect(fetch.isRunning, "fetch waits instead of failing")

        try await Self.restart(origin, reserved: reserved)
        try await waitUntil("fetch to end once the origin was back", interval: .milliseconds(100)) { !fetch.isRunning }
        await fetch.waitForExit()
        let printed = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        #expect(fetch.terminationStatus == 0, "\(printed)")
        let item = try #require(try Self.item("fg", cache: cache))
        #expect(item.state == .cached && item.segmentsDone == Self.segments)
        #expect(try Self.storedSegments(cache: cache, origin: origin, dir: dir) == Self.segments)
        await origin.stop()
    }

    /// A key server answering 503 is an unavailable origin too: the item waits (`idle`, `keyUnavailable` as its
    /// reason); once the key server answers, the next run completes. A key answering 404 still fails it.
    @Test func anUnavailableKeyServerLeavesTheItemWaiting() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        origin.setFault(.status(503), for: "/keys/key0.key")
        let waiting = try await fetch.fetch("/index.m3u8", id: "keyed", seconds: 4)
        #expect(waiting.state == .idle && waiting.errorCode == "keyUnavailable" && waiting.nextAttemptAt != nil, "\(waiting)")
        origin.setFault(nil, for: "/keys/key0.key")
        let done = try await fetch.downloader.run("keyed")
        #expect(done.state == .partiallyCached, "\(done.state) \(done.errorMessage ?? "")")

        // A cache of its own, so the key is fetched (not shared with the first item's stored copy).
        origin.setFault(.status(404), for: "/keys/key0.key")
        let other = try DownloaderHarness(origin: origin)
        defer { Task { await other.shutdown() } }
        let failed = try await other.fetch("/index.m3u8", id: "keyless", seconds: 4)
        #expect(failed.state == .failed && failed.errorCode == "keyUnavailable", "\(failed.state) \(failed.errorCode ?? "-")")
    }

    /// `--fail-fast` (for scripts): an unreachable origin fails the item with `network` and exit status 3.
    @Test func failFastFailsInsteadOfWaiting() async throws {
        let reserved = try #require(Self.reserve())
        defer { close(reserved.socket) }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-failfast-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let result = try await ServeShutdownTests.run(
            [
                "fetch", "http://127.0.0.1:\(reserved.port)/vod.m3u8", "--id", "ff", "--fail-fast", "--cache-dir", cache.path,
                "--free-disk-cushion", "0",
            ])
        #expect(result.status == 3)
        let item = try #require(try Self.item("ff", cache: cache))
        #expect(item.state == .failed && item.errorCode == "network", "\(item.state) \(item.errorCode ?? "-")")
    }
}

struct OutageTestFailure: Error, CustomStringConvertible {
    var description: String
}
