import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

@Suite("Watching: /events?item=&type= filters and `hlscache watch`")
struct WatchTests {
    @Test("a subscriber filtered by item and type gets only those events; bad filters are 400")
    func filteredEvents() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let all = EventRecorder(client: h.client, url: h.api("/events"))
        let onlyB = EventRecorder(client: h.client, url: h.api("/events?item=b&type=state"))
        let progressOfA = EventRecorder(client: h.client, url: h.api("/events?item=a&item=nothere&type=progress"))
        _ = try await h.eventually("three subscribers") { h.hub.subscriberCount == 3 ? true : nil }
        for id in ["a", "b"] {
            let created = try await h.request(
                .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"\#(id)","seconds":2}"#)
            #expect(created.status == 201)
        }
        _ = try await h.eventually("both settled (the unfiltered subscriber)") {
            all.states(of: "a").last == "partiallyCached" && all.states(of: "b").last == "partiallyCached" ? true : nil
        }
        _ = try await h.eventually("b's last state (filtered)") { onlyB.states(of: "b").last == "partiallyCached" ? true : nil }
        _ = try await h.eventually("a's last progress (filtered)") {
            progressOfA.events.contains { ($0.json["percent"] as? Double) == 100 } ? true : nil
        }
        #expect(all.events.contains { $0.type == "progress" && $0.json["id"] as? String == "b" })
        #expect(onlyB.events.allSatisfy { $0.type == "state" && $0.json["id"] as? String == "b" }, "\(onlyB.events.map(\.data))")
        #expect(onlyB.states(of: "b") == all.states(of: "b"))
        #expect(progressOfA.events.allSatisfy { $0.type == "progress" && $0.json["id"] as? String == "a" })

        for bad in ["type=bogus", "item=", "foo=1"] {
            let refused = try await h.request(.GET, h.api("/events?" + bad))
            openAPI.add("GET", "/events", refused)
            #expect(refused.status == 400, "\(bad)")
        }
        for recorder in [all, onlyB, progressOfA] {
            for event in recorder.events { openAPI.add(event: event) }
            await recorder.stop()
        }
        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
    }

    @Test("`hlscache watch` follows items a server downloads until they settle; the exit status says whether all cached")
    func watchUntilSettled() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let cache = ["--cache-dir", h.cacheDirectory.path]
        // One item is still downloading when the watch starts (a segment answered after 3 s; whether the watch
        // starts before or after it, both items end cached).
        h.origin.setFault(.stall(delay: .seconds(3)), for: "/v1/seg001.ts")
        for (id, path) in [("slow", "/master.m3u8"), ("quick", "/v0/index.m3u8")] {
            let created = try await h.request(
                .POST, h.api("/items"), json: #"{"url":"\#(h.originURL(path))","id":"\#(id)","tags":["w"]}"#)
            #expect(created.status == 201)
        }
        _ = try await h.eventually("slow started") { [.downloading, .cached].contains(try h.items.item("slow")?.state) ? true : nil }
        let run = try await CLI.run(["watch", "--tag", "w", "--json"] + cache)
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        let lines = run.stdout.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
        let last = try #require(lines.last)
        #expect(last["event"] as? String == "done" && last["cached"] as? Int == 2, "\(run.stdout)")
        for id in ["slow", "quick"] {
            let states = lines.filter { $0["id"] as? String == id }.compactMap { $0["state"] as? String }
            #expect(states.last == "cached", "\(id): \(states)")
        }

        // Settled already: one line each and the verdict at once. A failed item: exit 1. An unknown id: exit 7.
        let again = try await CLI.run(["watch", "slow", "quick"] + cache)
        #expect(again.status == 0 && again.stdout.contains("all 2 cached"), "\(again.stdout)")
        let missing = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/nothere.m3u8"))","id":"gone"}"#)
        #expect(missing.status == 201)
        let failed = try await CLI.run(["watch", "gone", "quick"] + cache)
        #expect(failed.status == 1, "\(failed.stdout) \(failed.stderr)")
        #expect(failed.stdout.contains("1 of 2 not cached: gone (failed)"), "\(failed.stdout)")
        let unknown = try await CLI.run(["watch", "nothere"] + cache)
        #expect(unknown.status == 7, "\(unknown.stderr)")
        await h.shutdown()
    }
}
