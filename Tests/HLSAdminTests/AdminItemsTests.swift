import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

@Suite("Admin API: items over HTTP and their events")
struct AdminItemsTests {
    static func tsStream() async throws -> URL {
        try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
    }

    @Test("POST an item, watch queued → downloading → partiallyCached on /events, lock, list, delete; responses match the OpenAPI spec")
    func itemLifecycle() async throws {
        let root = try await Self.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let events = EventRecorder(client: h.client, url: h.api("/events"))
        _ = try await h.eventually("the subscriber") { h.hub.subscriberCount == 1 ? true : nil }

        let master = h.originURL("/master.m3u8")
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(master)","seconds":4,"id":"vod1","expires":"7d"}"#)
        openAPI.add("POST", "/items", created)
        #expect(created.status == 201)
        #expect(created.headers.first(name: "Location") == "/api/v1/items/vod1")
        #expect(created.json["state"] as? String == "queued")
        #expect(created.json["expiresAt"] is String)
        #expect(created.headers.first(name: "Access-Control-Allow-Origin") == nil)

        _ = try await h.eventually("the item to settle") { events.states(of: "vod1").last == "partiallyCached" ? true : nil }
        let states = events.states(of: "vod1")
        #expect(states.first == "queued")
        #expect(states.contains("downloading"))
        #expect(states.firstIndex(of: "downloading")! < states.firstIndex(of: "partiallyCached")!)
        let progress = events.events.filter { $0.type == "progress" && ($0.json["id"] as? String) == "vod1" }
        #expect(!progress.isEmpty)
        let last = try #require(progress.last?.json)
        #expect(last["percent"] as? Double == 100)
        #expect((last["segments"] as? Int) == (last["segmentsTotal"] as? Int))
        #expect((last["bytes"] as? Int ?? 0) > 0)

        let shown = try await h.request(.GET, h.api("/items/vod1"))
        openAPI.add("GET", "/items/{id}", shown)
        #expect(shown.status == 200)
        #expect(shown.json["state"] as? String == "partiallyCached")
        #expect(shown.json["resources"] as? Int == shown.json["resourcesDone"] as? Int)
        #expect((shown.json["renditions"] as? [String])?.count == 3)

        let listed = try await h.request(.GET, h.api("/items?state=partiallyCached"))
        openAPI.add("GET", "/items", listed)
        #expect((listed.json["items"] as? [[String: Any]])?.map { $0["id"] as? String } == ["vod1"])
        let none = try await h.request(.GET, h.api("/items?state=queued"))
        #expect((none.json["items"] as? [Any])?.isEmpty == true)
        let badState = try await h.request(.GET, h.api("/items?state=bogus"))
        openAPI.add("GET", "/items", badState)
        #expect(badState.status == 400)

        let locked = try await h.request(.POST, h.api("/items/vod1/lock"))
        openAPI.add("POST", "/items/{id}/lock", locked)
        #expect(locked.status == 200 && locked.json["locked"] as? Bool == true)
        #expect(try h.items.require("vod1").locked)
        let unlocked = try await h.request(.POST, h.api("/items/vod1/unlock"))
        openAPI.add("POST", "/items/{id}/unlock", unlocked)
        #expect(unlocked.json["locked"] as? Bool == false)

        // A settled item cannot be paused; the same id cannot be created twice.
        let pause = try await h.request(.POST, h.api("/items/vod1/pause"))
        openAPI.add("POST", "/items/{id}/pause", pause)
        #expect(pause.status == 409)
        #expect(pause.json["error"] as? String == "invalidState")
        let again = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(master)","id":"vod1"}"#)
        openAPI.add("POST", "/items", again)
        #expect(again.status == 409)

        let kept = try await h.request(.DELETE, h.api("/items/vod1?keepMetadata=true"))
        openAPI.add("DELETE", "/items/{id}", kept)
        #expect(kept.status == 200 && kept.json["state"] as? String == "deleted")
        #expect(try h.items.require("vod1").state == .deleted)
        _ = try await h.eventually("the deleted event") { events.states(of: "vod1").last == "deleted" ? true : nil }
        let status = try await h.request(.GET, h.api("/status"))
        openAPI.add("GET", "/status", status)
        #expect(status.status == 200)

        let gone = try await h.request(.DELETE, h.api("/items/vod1"))
        openAPI.add("DELETE", "/items/{id}", gone)
        #expect(gone.status == 204 && gone.body.isEmpty)
        let missing = try await h.request(.GET, h.api("/items/vod1"))
        openAPI.add("GET", "/items/{id}", missing)
        #expect(missing.status == 404 && missing.json["error"] as? String == "notFound")
        #expect(try h.items.item("vod1") == nil)
        _ = try await h.eventually("the removed event") { events.events.contains { $0.type == "removed" } ? true : nil }

        for event in events.events { openAPI.add(event: event) }
        await events.stop()
        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
        #expect(output.contains("\(openAPI.count) responses checked, 0 mismatches"))
    }

    @Test("pause stops a running download, resume finishes it; an item queued by another process shows up on /events")
    func pauseResumeAndOtherChildProcess() async throws {
        let root = try await Self.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let events = EventRecorder(client: h.client, url: h.api("/events"))
        _ = try await h.eventually("the subscriber") { h.hub.subscriberCount == 1 ? true : nil }
        // One segment hangs: the item stays downloading until paused.
        h.origin.setFault(.stall(delay: .seconds(120)), for: "/v1/seg002.ts")
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"slow"}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("downloading") { events.states(of: "slow").contains("downloading") ? true : nil }
        let paused = try await h.request(.POST, h.api("/items/slow/pause"))
        #expect(paused.status == 200 && paused.json["state"] as? String == "paused")
        #expect(try h.items.require("slow").state == .paused)
        _ = try await h.eventually("the paused event") { events.states(of: "slow").last == "paused" ? true : nil }

        h.origin.setFault(nil, for: "/v1/seg002.ts")
        let resumed = try await h.request(.POST, h.api("/items/slow/resume"))
        #expect(resumed.status == 200 && resumed.json["state"] as? String == "queued")
        _ = try await h.eventually("cached") { events.states(of: "slow").last == "cached" ? true : nil }
        let states = events.states(of: "slow")
        let pausedAt = try #require(states.firstIndex(of: "paused"))
        #expect(Array(states[pausedAt...]) == ["paused", "queued", "downloading", "cached"])

        // What `hlscache fetch --detach` does from another process: a row in items.sqlite, seen by the poll.
        let other = try ItemStore(directory: h.cacheDirectory.path)
        try other.insert(DownloadItem(id: "from-cli", url: h.originURL("/v0/index.m3u8"), precacheSeconds: 2))
        // It appears with whatever state it has when first seen (queued, or already downloading if this server's
        // scheduler claimed it before the poll looked).
        _ = try await h.eventually("the other process's item") { events.states(of: "from-cli").isEmpty ? nil : true }
        _ = try await h.eventually("the other process's item to finish") {
            events.states(of: "from-cli").last == "partiallyCached" ? true : nil
        }
        // Removed by another process (`hlscache rm`): a removed event.
        try h.downloader.remove("from-cli", keepMetadata: false)
        _ = try await h.eventually("the removed event") {
            events.events.contains { $0.type == "removed" && ($0.json["id"] as? String) == "from-cli" } ? true : nil
        }
        await events.stop()
        await h.shutdown()
    }

    @Test("GET /keys lists the AES-128 keys of a downloaded item without their bytes")
    func keysWithoutBytes() async throws {
        let root = try await Streams.stream("aes128-rotation") { try FFmpeg.makeAES128(in: $0) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/index.m3u8"))","id":"aes"}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("cached") { try h.items.item("aes")?.state == .cached ? true : nil }
        let response = try await h.request(.GET, h.api("/keys"))
        #expect(response.status == 200)
        let keys = try #require(response.json["keys"] as? [[String: Any]])
        let keyDirectory = root.appendingPathComponent("keys")
        let keyFiles = try FileManager.default.contentsOfDirectory(atPath: keyDirectory.path).filter { $0.hasSuffix(".key") }
        #expect(keys.count == keyFiles.count)
        #expect(
            keys.allSatisfy {
                $0["state"] as? String == "valid" && ($0["id"] as? String)?.count == 32 && $0["host"] as? String == "127.0.0.1"
            })
        for file in keyFiles {
            let bytes = try Data(contentsOf: keyDirectory.appendingPathComponent(file))
            let hex = bytes.map { String(format: "%02x", $0) }.joined()
            #expect(!response.text.lowercased().contains(hex))
            #expect(!response.text.contains(bytes.base64EncodedString()))
        }
        let openAPI = OpenAPIRecords()
        openAPI.add("GET", "/keys", response)
        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
    }
}
