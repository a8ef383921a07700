import Foundation
import GRDB
import HLSCacheCore
import HLSCacheStore
@testable import HLSAdmin
import HLSDownloader
import HLSProxy
import HLSTestSupport
import NIOConcurrencyHelpers
import NIOHTTP1
import Testing

@Suite("Playback records (consumption)")
struct ConsumptionTests {
    @Test("playing segments through the proxy records last played and the served seconds; the API, /events and `hlscache show` report them")
    func consumptionRecorded() async throws {
        let root = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let events = EventRecorder(client: h.client, url: h.api("/events"))
        _ = try await h.eventually("the subscriber") { h.hub.subscriberCount == 1 ? true : nil }
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"watched"}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("cached") { try h.items.item("watched")?.state == .cached ? true : nil }
        #expect(try h.items.consumption("watched") == nil)

        // A player: the playlists, then the first two 2-second segments of the 400k variant and the fourth.
        for path in ["/master.m3u8", "/v0/index.m3u8", "/v0/seg000.ts", "/v0/seg001.ts", "/v0/seg003.ts"] {
            let response = try await h.request(.GET, h.proxyURL(path))
            #expect(response.status == 200, "\(path)")
            #expect(response.headers.first(name: "X-Cache") == "HIT", "\(path)")
        }
        let record = try await h.eventually("the playback record") { () -> ItemConsumption? in
            // Records are written off the request path, possibly out of order: wait for all three segments.
            guard let record = try h.items.consumption("watched"), record.served.count == 2, abs(record.servedSeconds - 6) < 0.2 else {
                return nil
            }
            return record
        }
        #expect(record.served.count == 2)
        #expect(abs(record.served[0][0] - 0) < 0.01 && abs(record.served[0][1] - 4) < 0.05, "\(record.served)")
        #expect(abs(record.served[1][0] - 6) < 0.05 && abs(record.served[1][1] - 8) < 0.1, "\(record.served)")
        #expect(abs(record.lastPlayedAt.timeIntervalSinceNow) < 600)

        let shown = try await h.request(.GET, h.api("/items/watched"))
        let consumption = try #require(shown.json["consumption"] as? [String: Any])
        #expect(consumption["lastPlayedAt"] is String)
        #expect(abs((consumption["servedSeconds"] as? Double ?? 0) - 6) < 0.2)
        _ = try await h.eventually("the played event") { events.events.contains { $0.type == "played" } ? true : nil }
        let status = try await h.request(.GET, h.api("/status"))
        let requests = try #require(status.json["requests"] as? [String: Any])
        #expect((requests["hits"] as? Int ?? 0) >= 5)
        #expect((requests["hitRatio"] as? Double ?? 0) > 0)

        // `hlscache show` (the real binary) on the same cache directory.
        let directory = h.cacheDirectory.path
        let (exit, stdout, _) = try await CLI.run(["show", "watched", "--cache-dir", directory, "--json"])
        #expect(exit == 0)
        let printed = try #require(try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any])
        #expect(printed["lastPlayedAt"] is String)
        #expect(abs((printed["servedSeconds"] as? Double ?? 0) - 6) < 0.2)
        #expect((printed["served"] as? [String])?.count == 2)
        let (_, text, _) = try await CLI.run(["show", "watched", "--cache-dir", directory])
        #expect(text.contains("lastPlayedAt: "))
        #expect(text.contains("0.000-4.000"))
        await events.stop()
        await h.shutdown()
    }

    @Test("while no item lists a resource nothing served is looked up in the items; once one does, its playback is recorded")
    func nothingIsLookedUpWhileNoItemListsAResource() async throws {
        let root = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let recorder = h.admin.recorder
        // A plain proxy: played, counted, and not looked up.
        for path in ["/master.m3u8", "/v0/index.m3u8", "/v0/seg000.ts", "/v0/seg001.ts"] {
            #expect(try await h.request(.GET, h.proxyURL(path)).status == 200, "\(path)")
        }
        let before = recorder.flushesAndMappedTargets.flushes
        // The flush after `before` took the answers; the one after that started once it had ended.
        _ = try await h.eventually("two flushes") { recorder.flushesAndMappedTargets.flushes >= before + 2 ? true : nil }
        #expect(recorder.flushesAndMappedTargets.mapped == 0)
        #expect(recorder.hitsAndMisses.misses >= 4)

        // An item of the stream: what is played from now on is its playback (the lookups start again).
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"later"}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("cached") { try h.items.item("later")?.state == .cached ? true : nil }
        for path in ["/master.m3u8", "/v0/index.m3u8", "/v0/seg002.ts"] {
            #expect(try await h.request(.GET, h.proxyURL(path)).status == 200, "\(path)")
        }
        let record = try await h.eventually("the playback record") { () -> ItemConsumption? in
            guard let record = try h.items.consumption("later"), abs(record.servedSeconds - 2) < 0.1 else { return nil }
            return record
        }
        #expect(abs(record.served[0][0] - 4) < 0.05, "\(record.served)")
        #expect(recorder.flushesAndMappedTargets.mapped >= 3)
        await h.shutdown()
    }

    @Test(
        "a busy server's answers are all recorded: the same targets answered tens of thousands of times between two flushes take one place each, and only distinct targets past the bound are dropped"
    )
    func manyAnswersOfFewTargetsAreNotDropped() async throws {
        try await Self.withRecorder { recorder in
            let hit: HTTPHeaders = ["X-Cache": "HIT"]
            let request = Self.request
            // 64 players of 25 segments, interleaved, 40,000 answers (a second of a busy server): nothing dropped.
            let requests = (0..<25).map { request("/http/127.0.0.1:1/v/seg\($0).ts") }
            for index in 0..<40_000 {
                let segment: Int = (index * 7 + index / 64) % 25
                recorder.observe(requests[segment], status: HTTPResponseStatus.ok, headers: hit)
            }
            #expect(recorder.droppedAnswers == 0)
            #expect(recorder.hitsAndMisses.hits == 40_000)
            // Distinct targets past the bound are dropped, and counted.
            for index in 0..<16_400 {
                recorder.observe(request("/http/127.0.0.1:1/v/other\(index).ts"), status: HTTPResponseStatus.ok, headers: hit)
            }
            #expect(recorder.droppedAnswers == 25 + 16_400 - 16_384)
        }
    }

    @Test("answers observed on many event loops at once are all counted, and a flush moves them to the totals once")
    func answersFromManyLoopsAreAllCounted() async throws {
        try await Self.withRecorder { recorder in
            let hit: HTTPHeaders = ["X-Cache": "HIT"]
            let miss: HTTPHeaders = ["X-Cache": "MISS"]
            // More loops than the recorder keeps boxes for: some share one.
            let loops = ShardedCounts.shards + 4
            await withTaskGroup(of: Void.self) { group in
                for loop in 0..<loops {
                    group.addTask {
                        for index in 0..<1_000 {
                            let request = Self.request("/http/127.0.0.1:1/v\(loop)/seg\(index % 50).ts")
                            recorder.observe(request, status: .ok, headers: index % 10 == 0 ? miss : hit, shard: loop)
                        }
                    }
                }
            }
            #expect(recorder.hitsAndMisses.hits == loops * 900 && recorder.hitsAndMisses.misses == loops * 100)
            #expect(recorder.droppedAnswers == 0)
            _ = recorder.flush(ItemChangeFeed.Changes(changed: [], removed: [], isFirst: false))
            #expect(recorder.hitsAndMisses.hits == loops * 900 && recorder.hitsAndMisses.misses == loops * 100)
            _ = recorder.flush(ItemChangeFeed.Changes(changed: [], removed: [], isFirst: false))
            #expect(recorder.hitsAndMisses.hits == loops * 900, "counted once")
        }
    }

    @Test("only GET and HEAD of proxied targets are counted, HEAD without a place among the played targets")
    func onlyProxiedGetAndHeadAreObserved() async throws {
        try await Self.withRecorder { recorder in
            let hit: HTTPHeaders = ["X-Cache": "HIT"]
            func observe(_ method: HTTPMethod, _ uri: String) {
                let request = ProxyRequest(head: HTTPRequestHead(version: .http1_1, method: method, uri: uri), remoteAddress: nil)
                recorder.observe(request, status: .ok, headers: hit)
            }
            for uri in ["/htt", "/api/v1/items", "/keys/1", "", "/HTTP/127.0.0.1:1/a.ts", "/htp/127.0.0.1:1/a.ts"] { observe(.GET, uri) }
            observe(.POST, "/http/127.0.0.1:1/a.ts")
            observe(.PUT, "/http/127.0.0.1:1/a.ts")
            observe(.RAW(value: "GETX"), "/http/127.0.0.1:1/a.ts")
            #expect(recorder.hitsAndMisses.hits == 0)
            observe(.HEAD, "/http/127.0.0.1:1/a.ts")
            observe(.GET, "/https/example.com/b.ts")
            observe(.GET, "/http")
            #expect(recorder.hitsAndMisses.hits == 3)
            // Past the bound of distinct targets only GETs take a place (and are dropped): the HEAD took none.
            for index in 0..<16_384 { observe(.GET, "/http/127.0.0.1:1/v/other\(index).ts") }
            #expect(recorder.droppedAnswers == 2)
        }
    }

    /// Runs `body` with a recorder on a store and an item table of their own, removed afterwards.
    private static func withRecorder(_ body: (ConsumptionRecorder) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-recorder-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try CacheStore.open(directory: directory.path, maxBytes: 1 << 30, freeDiskCushion: 0)
        defer { store.close() }
        let items = try ItemStore(directory: directory.path)
        try await body(ConsumptionRecorder(store: store, items: items, volatileParameters: []))
    }

    /// A `GET` of `uri` as the proxy hands it to the recorder.
    private static func request(_ uri: String) -> ProxyRequest {
        ProxyRequest(head: HTTPRequestHead(version: .http1_1, method: .GET, uri: uri), remoteAddress: nil)
    }

    @Test(
        "only items being played have their timelines in memory; segments past the precached part are recorded once the player read the playlist"
    )
    func timelinesLoadedOnlyForPlayedItems() async throws {
        let root = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        // "partial" precaches the first 2 seconds of every rendition; "other" is the whole 150k rendition.
        for body in [
            #"{"url":"\#(h.originURL("/master.m3u8"))","id":"partial","seconds":2}"#,
            #"{"url":"\#(h.originURL("/v1/index.m3u8"))","id":"other"}"#,
        ] {
            #expect(try await h.request(.POST, h.api("/items"), json: body).status == 201)
        }
        for (id, state) in [("partial", ItemState.partiallyCached), ("other", .cached)] {
            _ = try await h.eventually("\(id) \(state)") { try h.items.item(id)?.state == state ? true : nil }
        }
        try await Task.sleep(for: .milliseconds(300))  // a few admin polls: nothing played, nothing loaded
        #expect(h.admin.recorder.loadedItems.isEmpty)

        // A player of the 400k rendition: playlists, then seconds 4–8 (not precached: misses).
        for path in ["/master.m3u8", "/v0/index.m3u8", "/v0/seg002.ts", "/v0/seg003.ts"] {
            #expect(try await h.request(.GET, h.proxyURL(path)).status == 200, "\(path)")
        }
        let partial = try await h.eventually("the playback record of partial") { () -> ItemConsumption? in
            guard let record = try h.items.consumption("partial"), abs(record.servedSeconds - 4) < 0.2 else { return nil }
            return record
        }
        #expect(abs(partial.served[0][0] - 4) < 0.05, "\(partial.served)")
        #expect(h.admin.recorder.loadedItems == ["partial"])
        #expect(try h.items.consumption("other") == nil)

        // A segment "other" precached, served with no playlist first (a player still playing when serve restarted).
        #expect(try await h.request(.GET, h.proxyURL("/v1/seg001.ts")).status == 200)
        let other = try await h.eventually("the playback record of other") { try h.items.consumption("other") }
        #expect(abs(other.served[0][0] - 2) < 0.05 && abs(other.served[0][1] - 4) < 0.1, "\(other.served)")
        #expect(h.admin.recorder.loadedItems == ["partial", "other"])

        // Removing an item drops its timeline.
        #expect(try await h.request(.DELETE, h.api("/items/partial")).status == 204)
        _ = try await h.eventually("partial unloaded") { h.admin.recorder.loadedItems == ["other"] ? true : nil }
        await h.shutdown()
    }

    @Test(
        "an item read while one of its media playlists was missing from the store is read again once it is back: its segments are recorded")
    func aTimelineReadWithoutARenditionIsReadAgain() async throws {
        let root = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"gap"}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("cached") { try h.items.item("gap")?.state == .cached ? true : nil }
        // The 400k rendition's playlist leaves the store (evicted, or being replaced at the instant the timeline is read).
        #expect(try h.store.remove(CacheKey(try OriginURL(h.originURL("/v0/index.m3u8")))))

        // The player's master is recorded: the item's timeline is read, without the 400k rendition.
        #expect(try await h.request(.GET, h.proxyURL("/master.m3u8")).status == 200)
        _ = try await h.eventually("the timeline") { h.admin.recorder.loadedItems.contains("gap") ? true : nil }
        // The playlist comes back (a miss, stored again), then a segment of that rendition is played.
        for path in ["/v0/index.m3u8", "/v0/seg001.ts"] {
            #expect(try await h.request(.GET, h.proxyURL(path)).status == 200, "\(path)")
        }
        let record = try await h.eventually("the playback record") { () -> ItemConsumption? in
            guard let record = try h.items.consumption("gap"), abs(record.servedSeconds - 2) < 0.1 else { return nil }
            return record
        }
        #expect(abs(record.served[0][0] - 2) < 0.05 && abs(record.served[0][1] - 4) < 0.05, "\(record.served)")
        await h.shutdown()
    }

    @Test("what was played while items.sqlite could not be written (another connection held its write lock) is recorded once it can")
    func playbackIsKeptWhileTheItemsDatabaseIsLocked() async throws {
        let root = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let h = try await AdminHarness(root: root, itemsBusyTimeout: 0.1)
        defer { h.shutdownLater() }
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/v0/index.m3u8"))","id":"held"}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("cached") { try h.items.item("held")?.state == .cached ? true : nil }

        // Another connection (another process, as far as SQLite knows) takes the write lock and keeps it.
        let other = try await onOwnThread { try WriteLock(path: h.cacheDirectory.appendingPathComponent("items.sqlite").path) }
        for path in ["/v0/index.m3u8", "/v0/seg000.ts", "/v0/seg001.ts"] {
            #expect(try await h.request(.GET, h.proxyURL(path)).status == 200, "\(path)")
        }
        // Two failed flushes: the first one's targets were put back and tried again.
        _ = try await h.eventually("failed flushes") { h.admin.recorder.failedFlushes >= 2 ? true : nil }
        #expect(try h.items.consumption("held") == nil)

        await onOwnThread { other.release() }
        let record = try await h.eventually("the playback record", timeout: .seconds(120)) { () -> ItemConsumption? in
            guard let record = try h.items.consumption("held"), abs(record.servedSeconds - 4) < 0.2 else { return nil }
            return record
        }
        #expect(record.served.count == 1)
        #expect(abs(record.served[0][0]) < 0.01 && abs(record.served[0][1] - 4) < 0.05, "\(record.served)")
        await h.shutdown()
    }
}

/// The write lock of a SQLite file, held by a connection of its own on a thread of its own until released.
final class WriteLock: Sendable {
    private let acquired = DispatchSemaphore(value: 0)
    private let releasing = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// Blocks until the lock is held.
    init(path: String) throws {
        let queue = try DatabaseQueue(path: path)
        let failure = NIOLockedValueBox<(any Error)?>(nil)
        Thread.detachNewThread { [acquired, releasing, finished] in
            do {
                try queue.inTransaction(.immediate) { _ in
                    acquired.signal()
                    releasing.wait()
                    return .commit
                }
            } catch {
                failure.withLockedValue { $0 = error }
                acquired.signal()
            }
            finished.signal()
        }
        acquired.wait()
        if let error = failure.withLockedValue({ $0 }) { throw error }
    }

    /// Blocks until the lock is given up.
    func release() {
        releasing.signal()
        finished.wait()
    }
}
