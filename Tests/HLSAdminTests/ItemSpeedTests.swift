import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

@Suite("Speed and time left: bytesPerSecond and etaSeconds in the API, SSE progress and ls --json")
struct ItemSpeedTests {
    @Test("a capped download shows its moving speed (within the cap) and an ETA that follows from it; null once settled")
    func speedAndETAWhileDownloading() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let events = EventRecorder(client: h.client, url: h.api("/events"))
        _ = try await h.eventually("the subscriber") { h.hub.subscriberCount == 1 ? true : nil }
        // The item's own cap makes the run last seconds whatever the machine; a stalled last segment keeps it
        // downloading until the test releases it.
        let cap = 32 * 1024
        h.origin.setFault(.stall(delay: .seconds(300)), for: "/v1/seg003.ts")
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"speed","rate":\#(cap)}"#)
        openAPI.add("POST", "/items", created)
        #expect(created.status == 201)
        #expect(created.json["bytesPerSecond"] is NSNull && created.json["etaSeconds"] is NSNull, "queued: unknown")

        let shown = try await h.eventually("a known speed") { () -> AdminHarness.Response? in
            let response = try await h.request(.GET, h.api("/items/speed"))
            return response.json["state"] as? String == "downloading" && response.json["bytesPerSecond"] is Int ? response : nil
        }
        openAPI.add("GET", "/items/{id}", shown)
        let speed = try #require(shown.json["bytesPerSecond"] as? Int)
        // The moving average of a run paced at `cap` (its bucket lets a quarter second more through at most).
        #expect(speed <= 2 * cap, "\(speed) B/s under a cap of \(cap)")
        let done = try #require(shown.json["bytesDone"] as? Int)
        let total = try #require(shown.json["bytesTotal"] as? Int)
        if speed > 0 && total > done {
            let eta = try #require(shown.json["etaSeconds"] as? Int)
            #expect(abs(Double(eta) - Double(total - done) / Double(speed)) <= 1.5, "eta \(eta) for \(total - done) bytes at \(speed)")
        } else {
            #expect(shown.json["etaSeconds"] is NSNull)
        }
        let listed = try await h.request(.GET, h.api("/items"))
        openAPI.add("GET", "/items", listed)

        // `ls --json` in another process reads the same speed from items.sqlite.
        let ls = try await CLI.run(["ls", "--json", "--cache-dir", h.cacheDirectory.path])
        let row = try #require(
            ls.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first)
        #expect(row["state"] as? String == "downloading")
        #expect(row["bytesPerSecond"] is Int, "\(ls.stdout)")
        #expect(row.keys.contains("etaSeconds"))

        // SSE progress events carry the speed of the run.
        _ = try await h.eventually("a progress event with a speed") {
            events.events.contains { $0.type == "progress" && $0.json["bytesPerSecond"] is Int } ? true : nil
        }

        // Paused, released, resumed: the stalled transfer is dropped with the pause.
        #expect(try await h.request(.POST, h.api("/items/speed/pause")).status == 200)
        _ = try await h.eventually("paused") { events.states(of: "speed").last == "paused" ? true : nil }
        let paused = try await h.request(.GET, h.api("/items/speed"))
        #expect(paused.json["bytesPerSecond"] is NSNull, "paused: no speed")
        h.origin.setFault(nil, for: "/v1/seg003.ts")
        #expect(try await h.request(.POST, h.api("/items/speed/resume")).status == 200)
        _ = try await h.eventually("cached") { events.states(of: "speed").last == "cached" ? true : nil }
        let settled = try await h.request(.GET, h.api("/items/speed"))
        openAPI.add("GET", "/items/{id}", settled)
        #expect(settled.json["bytesPerSecond"] is NSNull && settled.json["etaSeconds"] is NSNull, "settled: no speed")

        for event in events.events { openAPI.add(event: event) }
        await events.stop()
        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
    }
}
