import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HLSTestSupport
import NIOCore
import Testing

/// The run-time policies that act on downloads (docs/api.md#policies), on the real binary with a real origin:
/// `downloads.concurrentItems` raised starts a queued item at once and lowered lets the running ones finish,
/// `downloads.defaultSeconds` gives an item created without seconds its length (API and `fetch`), and
/// `downloads.autoPurge` removes an expired unlocked item and keeps a locked one.
@Suite struct PolicyDownloadTests {
    /// A server on the cache directory; `environment` adds settings. The origin read timeout is long: a held segment
    /// must keep its item `downloading` however long the test takes.
    private static func startServe(cache: URL, environment: [String: String] = [:]) async throws -> (ChildProcess, String) {
        try await CLI.startServe(
            cache: cache.path, environment: ["HLSCACHE_ORIGIN_READ_TIMEOUT": "10m"].merging(environment) { $1 })
    }

    private static func stop(_ process: ChildProcess) async throws {
        #expect(try await CLI.stop(process))
    }

    static func request(_ base: String, _ path: String, method: String = "GET", body: String? = nil) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: base + "/api/v1" + path)!)
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, object)
    }

    private static func policies(_ object: [String: Any]) -> [String: String] {
        object["policies"] as? [String: String] ?? [:]
    }

    /// The item's state as the API reports it (nil: no such item).
    private static func state(_ base: String, _ id: String) async throws -> String? {
        let (status, item) = try await request(base, "/items/\(id)")
        return status == 200 ? item["state"] as? String : nil
    }

    /// Polls until `condition` holds; fails the test there, naming `what`, if it still does not after 300 s (a bound,
    /// not a measure: the event decides).
    private static func wait(_ what: String, _ condition: () async throws -> Bool) async throws {
        try await waitUntil(what, interval: .milliseconds(100), condition)
    }

    /// A VOD stream `name.m3u8` of `count` 2-second segments `name0.ts`… in `dir`.
    private static func writeStream(_ name: String, count: Int, in dir: URL) throws {
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
        for index in 0..<count {
            playlist += "#EXTINF:2.0,\n\(name)\(index).ts\n"
            try Data((0..<20_000).map { UInt8(truncatingIfNeeded: $0 &+ index) }).write(
                to: dir.appendingPathComponent("\(name)\(index).ts"))
        }
        playlist += "#EXT-X-ENDLIST\n"
        try Data(playlist.utf8).write(to: dir.appendingPathComponent("\(name).m3u8"))
    }

    private static func directories(_ label: String) throws -> (origin: URL, cache: URL) {
        let origin = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-\(label)-origin-\(UUID().uuidString)")
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: origin, withIntermediateDirectories: true)
        return (origin, cache)
    }

    @Test func concurrencyRaisedStartsAQueuedItemAndLoweredLetsRunningOnesFinish() async throws {
        let (dir, cache) = try Self.directories("concurrency")
        defer {
            try? FileManager.default.removeItem(at: dir)
            try? FileManager.default.removeItem(at: cache)
        }
        for name in ["a", "b", "c"] { try Self.writeStream(name, count: 2, in: dir) }
        let origin = TestOrigin(root: dir)
        try await origin.start()
        // The first segment of each stream is held: an item that reached it stays `downloading` until released.
        for name in ["a", "b", "c"] { origin.setFault(.held, for: "/\(name)0.ts") }
        let (process, base) = try await Self.startServe(cache: cache, environment: ["HLSCACHE_DOWNLOADS_CONCURRENT_ITEMS": "1"])
        defer { if process.isRunning { process.terminate() } }
        #expect(Self.policies(try await Self.request(base, "/policies").1)["downloads.concurrentItems"] == "1")

        for name in ["a", "b"] {
            let (status, _) = try await Self.request(
                base, "/items", method: "POST", body: #"{"url":"\#(origin.baseURL)/\#(name).m3u8","id":"item-\#(name)"}"#)
            #expect(status == 201)
        }
        try await Self.wait("the first item to reach its held segment") { origin.hits("/a0.ts") > 0 }
        #expect(try await Self.state(base, "item-a") == "downloading")
        // One at a time: the second waits, its stream untouched.
        #expect(try await Self.state(base, "item-b") == "queued")
        #expect(origin.hits("/b.m3u8") == 0)

        // Raised to 2: the queued item starts while the first still runs.
        let (raised, view) = try await Self.request(base, "/policies", method: "PATCH", body: #"{"downloads.concurrentItems":"2"}"#)
        #expect(raised == 200)
        #expect(Self.policies(view)["downloads.concurrentItems"] == "2")
        try await Self.wait("the second item to start after the raise") { origin.hits("/b0.ts") > 0 }
        #expect(try await Self.state(base, "item-b") == "downloading")
        #expect(try await Self.state(base, "item-a") == "downloading")

        // Refused like the config file's value (1…64), nothing changed.
        let (refused, error) = try await Self.request(base, "/policies", method: "PATCH", body: #"{"downloads.concurrentItems":"0"}"#)
        #expect(refused == 400)
        #expect("\(error)".contains("downloads.concurrentItems"))

        // Lowered to 1 with two running and a third queued: both running finish, the third starts only after.
        let (lowered, _) = try await Self.request(base, "/policies", method: "PATCH", body: #"{"downloads.concurrentItems":"1"}"#)
        #expect(lowered == 200)
        let (created, _) = try await Self.request(
            base, "/items", method: "POST", body: #"{"url":"\#(origin.baseURL)/c.m3u8","id":"item-c"}"#)
        #expect(created == 201)
        #expect(try await Self.state(base, "item-a") == "downloading")
        #expect(try await Self.state(base, "item-b") == "downloading")
        origin.releasePattern("/a0.ts")
        try await Self.wait("item-a cached") { try await Self.state(base, "item-a") == "cached" }
        // One still runs (b): c waits for it.
        #expect(try await Self.state(base, "item-c") == "queued")
        #expect(origin.hits("/c.m3u8") == 0)
        origin.releasePattern("/b0.ts")
        try await Self.wait("item-b cached") { try await Self.state(base, "item-b") == "cached" }
        try await Self.wait("the third item to start once none ran") { origin.hits("/c0.ts") > 0 }
        origin.releasePattern("/c0.ts")
        try await Self.wait("item-c cached") { try await Self.state(base, "item-c") == "cached" }
        try await Self.stop(process)
        await origin.stop()
    }

    @Test func defaultSecondsAppliesToNewItemsOfTheAPIAndOfFetch() async throws {
        let (dir, cache) = try Self.directories("default-seconds")
        defer {
            try? FileManager.default.removeItem(at: dir)
            try? FileManager.default.removeItem(at: cache)
        }
        try Self.writeStream("s", count: 4, in: dir)
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let (process, base) = try await Self.startServe(cache: cache)
        defer { if process.isRunning { process.terminate() } }
        #expect(Self.policies(try await Self.request(base, "/policies").1)["downloads.defaultSeconds"] == "0")

        let (bad, _) = try await Self.request(base, "/policies", method: "PATCH", body: #"{"downloads.defaultSeconds":"40000"}"#)
        #expect(bad == 400)
        let (changed, view) = try await Self.request(base, "/policies", method: "PATCH", body: #"{"downloads.defaultSeconds":"2"}"#)
        #expect(changed == 200)
        #expect((view["overrides"] as? [String: String])?["downloads.defaultSeconds"] == "2")

        // An item without seconds gets 2: only the first 2-second segment is fetched.
        let (status, item) = try await Self.request(
            base, "/items", method: "POST", body: #"{"url":"\#(origin.baseURL)/s.m3u8","id":"short"}"#)
        #expect(status == 201)
        #expect((item["seconds"] as? NSNumber)?.intValue == 2)
        try await Self.wait("the item without seconds partiallyCached") { try await Self.state(base, "short") == "partiallyCached" }
        #expect(origin.hits("/s0.ts") == 1)
        #expect(origin.hits("/s3.ts") == 0)
        // One given keeps its own.
        let (_, whole) = try await Self.request(
            base, "/items", method: "POST", body: #"{"url":"\#(origin.baseURL)/s.m3u8?whole","id":"whole","seconds":0}"#)
        #expect((whole["seconds"] as? NSNumber)?.intValue == 0)

        // `hlscache fetch` without --seconds reads the same stored policy.
        let fetch = try await CLI.run(["fetch", origin.baseURL + "/s.m3u8?cli", "--detach", "--id", "cli", "--cache-dir", cache.path])
        #expect(fetch.status == 0, "\(fetch.stderr)")
        let (_, cli) = try await Self.request(base, "/items/cli")
        #expect((cli["seconds"] as? NSNumber)?.intValue == 2)
        let given = try await CLI.run([
            "fetch", origin.baseURL + "/s.m3u8?given", "--detach", "--id", "given", "--seconds", "4", "--cache-dir", cache.path,
        ])
        #expect(given.status == 0, "\(given.stderr)")
        #expect((try await Self.request(base, "/items/given").1["seconds"] as? NSNumber)?.intValue == 4)
        try await Self.stop(process)
        await origin.stop()
    }

    @Test func autoPurgeRemovesAnExpiredUnlockedItemAndKeepsALockedOne() async throws {
        let (dir, cache) = try Self.directories("auto-purge")
        defer {
            try? FileManager.default.removeItem(at: dir)
            try? FileManager.default.removeItem(at: cache)
        }
        try Self.writeStream("p", count: 2, in: dir)
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let (process, base) = try await Self.startServe(cache: cache)
        defer { if process.isRunning { process.terminate() } }

        // Off by default: an expired item stays listed.
        let (_, _) = try await Self.request(
            base, "/items", method: "POST", body: #"{"url":"\#(origin.baseURL)/p.m3u8?kept","id":"before","expires":1}"#)
        try await Self.wait("the item to expire") { try await Self.state(base, "before") == "expired" }

        let (bad, _) = try await Self.request(base, "/policies", method: "PATCH", body: #"{"downloads.autoPurge":"maybe"}"#)
        #expect(bad == 400)
        let (on, view) = try await Self.request(base, "/policies", method: "PATCH", body: #"{"downloads.autoPurge":"true"}"#)
        #expect(on == 200)
        #expect(Self.policies(view)["downloads.autoPurge"] == "true")
        // Turned on, it sweeps what expired before.
        try await Self.wait("the item expired before to be removed") { try await Self.state(base, "before") == nil }

        // The locked item expires first, the unlocked one after: by the time the unlocked one is gone, a sweep ran
        // after the locked one expired.
        let (lockedStatus, _) = try await Self.request(
            base, "/items", method: "POST", body: #"{"url":"\#(origin.baseURL)/p.m3u8?locked","id":"locked","lock":true,"expires":1}"#)
        #expect(lockedStatus == 201)
        let (plainStatus, _) = try await Self.request(
            base, "/items", method: "POST", body: #"{"url":"\#(origin.baseURL)/p.m3u8?plain","id":"plain","expires":3}"#)
        #expect(plainStatus == 201)
        try await Self.wait("the unlocked item to be removed once expired") { try await Self.state(base, "plain") == nil }
        #expect(try await Self.state(base, "locked") == "expired")
        let (_, locked) = try await Self.request(base, "/items/locked")
        #expect(locked["locked"] as? Bool == true)
        try await Self.stop(process)
        await origin.stop()
    }
}
