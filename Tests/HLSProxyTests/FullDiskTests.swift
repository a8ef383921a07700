import AsyncHTTPClient
import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import NIOCore
import NIOPosix
import Testing

/// A cache on a file system that really fills up (a tmpfs of a few MiB, ``TinyDisk``), with the real binary:
/// `ENOSPC` in the middle of a write, not a size cap. Nothing half-written is left, no record is lost, the
/// player still gets every byte, and once there is room again the same commands finish the job.
@Suite(.serialized, .enabled(if: TinyDisk.isAvailable, "needs `unshare -Urm` and tmpfs (user namespaces)"))
struct FullDiskTests {
    /// Four 1 MiB segments sent without Content-Length (chunked), so no size check can refuse them before the
    /// bytes arrive: the write itself runs out of space.
    static func origin(segments: Int = 4, size: Int = 1 << 20) async throws -> (URL, TestOrigin) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fulldisk-origin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n"
        for index in 0..<segments {
            try Data(randomBytes(size)).write(to: dir.appendingPathComponent("seg\(index).ts"))
            playlist += "#EXTINF:4.0,\nseg\(index).ts\n"
        }
        try Data((playlist + "#EXT-X-ENDLIST\n").utf8).write(to: dir.appendingPathComponent("index.m3u8"))
        let origin = TestOrigin(root: dir)
        try await origin.start()
        for index in 0..<segments { origin.setFault(.noLength(chunk: 64 << 10), for: "/seg\(index).ts") }
        return (dir, origin)
    }

    /// Fills the tmpfs with a file `filler`, leaving about `leave` bytes free.
    static func fill(_ disk: TinyDisk, leaving leave: Int) throws {
        let filled = try disk.run(
            "head -c $(( $(df -k --output=avail \(disk.path) | tail -1) * 1024 - \(leave) )) /dev/zero > \(disk.path)/filler")
        #expect(filled.status == 0, "\(filled.output)")
    }

    static let hlscache = "'\(CLI.binary.path)'"

    /// Starts `serve` in the namespace with its cache in the tmpfs, its output in `log` (outside it); returns its
    /// pid and base URL.
    static func serve(on disk: TinyDisk, log: URL) async throws -> (Int32, String) {
        try? FileManager.default.removeItem(at: log)
        let started = try await onOwnThread {
            try disk.run(
                "\(hlscache) serve --listen 127.0.0.1:0 --cache-dir \(disk.path)/cache --free-disk-cushion 0 --prefetch-segments 0 > \(log.path) 2>&1 & echo $!"
            )
        }
        let pid = try #require(Int32(started.output.trimmingCharacters(in: .whitespacesAndNewlines)), "\(started.output)")
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            if let base = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).first(where: { $0.hasPrefix("http://127.0.0.1:") }) {
                return (pid, String(base))
            }
            // Just started: alive (or its zombie), not yet a pid another program could have (isServe would say no
            // until the shell has exec'd the binary).
            if kill(pid, 0) != 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        kill(pid, SIGTERM)
        throw TinyDisk.Failure(message: "serve did not start: \((try? String(contentsOf: log, encoding: .utf8)) ?? "")")
    }

    /// SIGTERM, then waits (up to 300 s, a bound for a loaded machine) until the process is gone.
    static func stop(_ pid: Int32) async throws {
        signal(pid, SIGTERM)
        try await waitUntil("serve \(pid) to stop", interval: .milliseconds(50)) { !isServe(pid) }
    }

    /// Whether `pid` is still a running `serve` of the binary under test. The shell that started it has exited, so a
    /// serve that stops is reaped by init at once and its pid may soon be another program's (pid_max is 32768 on the
    /// test machine, where ~80 pids a second are used): never signal that one.
    static func isServe(_ pid: Int32) -> Bool {
        guard let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
        let arguments = command.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return arguments.first == CLI.binary.path && arguments.dropFirst().first == "serve"
    }

    /// Sends `number` to `pid` if it is still a `serve` of ours.
    static func signal(_ pid: Int32, _ number: Int32) {
        if isServe(pid) { kill(pid, number) }
    }

    static func get(_ url: String) async throws -> (status: UInt, cache: String?, body: [UInt8]) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: url), timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 16 << 20)
        return (response.status.code, response.headers.first(name: "X-Cache"), Array(buffer: body))
    }

    /// Waits until the last miss of `serve` at `base` is over: its download has left (`/metrics` counts no origin
    /// download in flight: one leaves after its commit, index row included, or after its failure is counted) and the
    /// cache's `tmp` directory is empty (each temp file was renamed into place or removed). Events, not a pause: a
    /// fixed wait for the index row was a guess a loaded machine could outlast.
    static func settled(_ disk: TinyDisk, base: String) async throws {
        let tmp = disk.outside.appendingPathComponent("cache/tmp")
        try await waitUntil("the cache's writes to be over (in tmp/: \(files(in: tmp)))", interval: .milliseconds(50)) {
            guard files(in: tmp).isEmpty else { return false }
            let metrics = String(decoding: try await get(base + "/metrics").body, as: UTF8.self)
            let inFlight = metrics.split(separator: "\n").first { $0.hasPrefix("hlscache_origin_fetches_in_flight ") }
            return inFlight.flatMap { Double($0.split(separator: " ").last ?? "") } == 0
        }
    }

    static func files(in directory: URL) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    }

    /// `fetch` onto a disk with 1.5 MiB free: exit 5 `cacheFull` naming the full disk, the item recorded as
    /// failed with its finished segments, no temp file left. After `rm filler`, `resume` completes it and every
    /// stored segment is byte-identical to the origin's.
    @Test func aPrewarmThatFillsTheDiskFailsCleanlyAndResumesOnceThereIsRoom() async throws {
        let (dir, origin) = try await Self.origin()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await onOwnThread {
            let disk = try TinyDisk(size: 8 << 20)
            defer { disk.close() }
            let cache = "\(disk.path)/cache"
            let hlscache = Self.hlscache
            let common = "--cache-dir \(cache) --free-disk-cushion 0"
            #expect(try disk.run("\(hlscache) ls \(common)").status == 0)  // the databases exist before the disk fills
            try Self.fill(disk, leaving: 1_500_000)

            let fetch = try disk.run("\(hlscache) fetch \(origin.baseURL)/index.m3u8 --id full \(common)")
            #expect(fetch.status == 5, "\(fetch.output)")
            #expect(fetch.output.contains("cacheFull"), "\(fetch.output)")
            // The write that meets ENOSPC says so; when the index's own write found the disk full first, it names the
            // full file system. Either way the user is told the disk is full.
            #expect(fetch.output.contains("no space left on device") || fetch.output.contains("is full (0 B free)"), "\(fetch.output)")
            let failed = try disk.run("\(hlscache) show full --json \(common)")
            let item = try #require(try JSONSerialization.jsonObject(with: Data(failed.output.utf8)) as? [String: Any], "\(failed.output)")
            #expect(item["state"] as? String == "failed" && item["error"] as? String == "cacheFull", "\(item)")
            #expect(Self.files(in: disk.outside.appendingPathComponent("cache/tmp")).isEmpty, "no temp file left")

            #expect(try disk.run("rm \(disk.path)/filler").status == 0)
            let resume = try disk.run("\(hlscache) resume full \(common)")
            #expect(resume.status == 0, "\(resume.output)")
            let done = try disk.run("\(hlscache) show full --json \(common)")
            let cached = try #require(try JSONSerialization.jsonObject(with: Data(done.output.utf8)) as? [String: Any], "\(done.output)")
            #expect(cached["state"] as? String == "cached", "\(cached)")
            #expect(cached["segmentsDone"] as? Int == 4, "\(cached)")

            // SQLite resolves the /proc/PID/root link to "/": the cache is copied out to be opened here.
            let copy = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fulldisk-copy-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: copy) }
            #expect(try disk.run("cp -a \(cache) \(copy.path)").status == 0)
            let store = try CacheStore.open(directory: copy.path, maxBytes: 1 << 30, freeDiskCushion: 0)
            defer { store.close() }
            for index in 0..<4 {
                let object = try #require(store.lookup(CacheKey(try OriginURL("\(origin.baseURL)/seg\(index).ts"))), "seg\(index)")
                let same =
                    FileManager.default.contents(atPath: object.path)
                    == FileManager.default.contents(
                        atPath: dir.appendingPathComponent("seg\(index).ts").path)
                #expect(same, "seg\(index) differs from the origin")
            }
        }
        await origin.stop()
    }

    /// `serve` with 1.5 MiB free: a 2 MiB miss is streamed whole to the player while its cache write fails, and
    /// is not cached (the next request is a miss again); a small segment is still cached (the server keeps
    /// working); once there is room the big one is a miss, then a hit.
    @Test func aMissThatFillsTheDiskStillReachesThePlayerWhole() async throws {
        let (dir, origin) = try await Self.origin(segments: 2, size: 2 << 20)
        defer { try? FileManager.default.removeItem(at: dir) }
        let small = randomBytes(100_000)
        origin.setBody(small, contentType: "video/mp2t", for: "/small.ts")
        let big = try [UInt8](Data(contentsOf: dir.appendingPathComponent("seg0.ts")))
        let disk = try TinyDisk(size: 8 << 20)
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fulldisk-\(UUID().uuidString).log")
        defer {
            try? FileManager.default.removeItem(at: log)
            disk.close()
        }
        let (pid, base) = try await Self.serve(on: disk, log: log)
        defer { Self.signal(pid, SIGTERM) }
        let proxy = base + "/http/127.0.0.1:\(origin.port)"
        try await onOwnThread { try Self.fill(disk, leaving: 1_500_000) }

        func get(_ path: String) async throws -> (status: UInt, cache: String?, body: [UInt8]) { try await Self.get(proxy + path) }
        func settled() async throws { try await Self.settled(disk, base: base) }

        let first = try await get("/seg0.ts")
        #expect(first.status == 200 && first.cache == "MISS")
        let whole = first.body == big
        #expect(whole, "the player got \(first.body.count) of \(big.count) bytes")
        try await settled()
        #expect(Self.files(in: disk.outside.appendingPathComponent("cache/tmp")).isEmpty, "no temp file left")
        let again = try await get("/seg0.ts")
        #expect(again.cache == "MISS", "not cached: there was no room")
        #expect(again.body.count == big.count)
        try await settled()
        let metrics = String(decoding: try await Self.get(base + "/metrics").body, as: UTF8.self)
        #expect(
            metrics.contains("hlscache_cache_write_failures_total{reason=\"full\"} 2"),
            "\(metrics.split(separator: "\n").filter { $0.contains("write_failures") })")
        let free = metrics.split(separator: "\n").first { $0.hasPrefix("hlscache_cache_disk_free_bytes ") }.flatMap {
            Double($0.split(separator: " ")[1])
        }
        #expect((free ?? .infinity) < 2_000_000, "\(String(describing: free))")

        #expect(try await get("/small.ts").cache == "MISS")
        try await settled()
        let smallHit = try await get("/small.ts")
        #expect(smallHit.cache == "HIT" && smallHit.body == small, "a small object still fits and is cached")

        let removed = try await onOwnThread { try disk.run("rm \(disk.path)/filler") }
        #expect(removed.status == 0)
        #expect(try await get("/seg1.ts").cache == "MISS")
        try await settled()
        let hit = try await get("/seg1.ts")
        #expect(hit.cache == "HIT", "room again: cached")
        let same = hit.body == [UInt8](try Data(contentsOf: dir.appendingPathComponent("seg1.ts")))
        #expect(same)
        let logged = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        #expect(logged.contains("no space left on device"), "the full disk is logged: \(logged.suffix(2000))")
        await origin.stop()
    }

    /// A disk that filled up while `serve` was stopped (by something else: 0 bytes free): `serve` starts again,
    /// `/readyz` says "degraded" (200), it serves its hits and passes misses through uncached; `ls` works; `fetch`
    /// says the disk is full (exit 5).
    /// A new cache on that disk cannot be made: one line saying so, exit 5, no usage text.
    @Test func aRestartOnAFullDiskServesTheHits() async throws {
        let (dir, origin) = try await Self.origin(segments: 2, size: 1 << 20)
        defer { try? FileManager.default.removeItem(at: dir) }
        let disk = try TinyDisk(size: 8 << 20)
        let log = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fulldisk-\(UUID().uuidString).log")
        defer {
            try? FileManager.default.removeItem(at: log)
            disk.close()
        }
        let segments = try (0..<2).map { [UInt8](try Data(contentsOf: dir.appendingPathComponent("seg\($0).ts"))) }

        let (first, base) = try await Self.serve(on: disk, log: log)
        #expect(try await Self.get(base + "/http/127.0.0.1:\(origin.port)/seg0.ts").cache == "MISS")
        try await Self.settled(disk, base: base)
        try await Self.stop(first)

        let common = "--cache-dir \(disk.path)/cache --free-disk-cushion 0"
        let (list, fetch, fresh) = try await onOwnThread {
            try Self.fill(disk, leaving: 0)
            return (
                try disk.run("\(Self.hlscache) ls \(common)"),
                try disk.run("\(Self.hlscache) fetch \(origin.baseURL)/index.m3u8 --id late \(common)"),
                try disk.run("\(Self.hlscache) ls --cache-dir \(disk.path)/other")
            )
        }
        #expect(list.status == 0, "\(list.output)")
        #expect(fetch.status == 5, "\(fetch.output)")
        #expect(fetch.output.contains("cacheFull") && fetch.output.contains("is full"), "\(fetch.output)")
        #expect(fresh.status == 5, "\(fresh.output)")
        #expect(fresh.output.hasPrefix("hlscache: cacheFull: cannot open the cache in \(disk.path)/other"), "\(fresh.output)")
        #expect(fresh.output.contains("is full") && !fresh.output.contains("Usage"), "\(fresh.output)")

        let (second, again) = try await Self.serve(on: disk, log: log)
        defer { Self.signal(second, SIGTERM) }
        // Ready, degraded: still worth sending players to (a 503 would take a serving cache out of rotation).
        let ready = try await Self.get(again + "/readyz")
        let readyText = String(decoding: ready.body, as: UTF8.self)
        #expect(ready.status == 200, "\(readyText)")
        #expect(readyText.contains("\"status\":\"degraded\"") && readyText.contains("is full"), "\(readyText)")
        let proxy = again + "/http/127.0.0.1:\(origin.port)"
        let hit = try await Self.get(proxy + "/seg0.ts")
        #expect(hit.status == 200 && hit.cache == "HIT")
        let sameHit = hit.body == segments[0]
        #expect(sameHit)
        for attempt in 0..<2 {
            let miss = try await Self.get(proxy + "/seg1.ts")
            #expect(miss.status == 200 && miss.cache == "MISS", "attempt \(attempt)")
            let sameMiss = miss.body == segments[1]
            #expect(sameMiss, "attempt \(attempt): \(miss.body.count) bytes")
            try await Self.settled(disk, base: again)
        }
        try await Self.stop(second)
        await origin.stop()
    }
}
