import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

/// Issue 25 over HTTP: `"start": false` creates an item that loads its playlists and waits (`ready`) until resumed;
/// `PATCH /items/{id}` changes its expiry (relative or absolute) and lock; `keepMetadata` then resume downloads it
/// again. Responses are checked against docs/openapi.yaml.
@Suite("Admin API: create without starting, PATCH, resume after deleting the files")
struct AdminLifecycleTests {
    @Test func createWithoutStartPatchAndResume() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"idle-task","start":false}"#)
        openAPI.add("POST", "/items", created)
        #expect(created.status == 201 && created.json["state"] as? String == "ready", "\(created.json)")
        let loaded = try await h.eventually("its playlists loaded") { () -> DownloadItem? in
            guard let item = try h.items.item("idle-task"), item.renditions.count == 3 else { return nil }
            return item
        }
        #expect(loaded.state == .ready && loaded.segmentsTotal > 0 && loaded.bytesTotal > 0)
        #expect(h.origin.requests.allSatisfy { $0.path.hasSuffix(".m3u8") }, "nothing but playlists: \(h.origin.requests.map(\.path))")

        let patched = try await h.request(.PATCH, h.api("/items/idle-task"), json: #"{"expiresAt":"2030-01-01T00:00:00Z","lock":true}"#)
        openAPI.add("PATCH", "/items/{id}", patched)
        #expect(patched.status == 200, "\(patched.text)")
        #expect((patched.json["expiresAt"] as? String)?.hasPrefix("2030-01-01T00:00:00") == true && patched.json["locked"] as? Bool == true)
        let relative = try await h.request(.PATCH, h.api("/items/idle-task"), json: #"{"expires":"7d"}"#)
        openAPI.add("PATCH", "/items/{id}", relative)
        let week = Date().addingTimeInterval(7 * 86400)
        let expiry = try #require(try h.items.item("idle-task")?.expiresAt)
        #expect(abs(expiry.timeIntervalSince(week)) < 120, "\(expiry)")
        let never = try await h.request(.PATCH, h.api("/items/idle-task"), json: #"{"expires":null}"#)
        #expect(never.status == 200 && never.json["expiresAt"] == nil, "\(never.text)")
        let capped = try await h.request(.PATCH, h.api("/items/idle-task"), json: #"{"rate":"4MiB"}"#)
        openAPI.add("PATCH", "/items/{id}", capped)
        #expect(capped.status == 200 && capped.json["rate"] as? Int == 4 << 20, "\(capped.text)")
        let uncapped = try await h.request(.PATCH, h.api("/items/idle-task"), json: #"{"rate":null}"#)
        #expect(uncapped.status == 200 && uncapped.json["rate"] == nil, "\(uncapped.text)")
        for bad in [
            #"{}"#, #"{"expires":"soon"}"#, #"{"lock":"yes"}"#, #"{"rate":"fast"}"#, #"{"speed":1}"#,
            #"{"expires":"7d","expiresAt":"2030-01-01T00:00:00Z"}"#,
        ] {
            let refused = try await h.request(.PATCH, h.api("/items/idle-task"), json: bad)
            openAPI.add("PATCH", "/items/{id}", refused)
            #expect(refused.status == 400, "\(bad): \(refused.status) \(refused.text)")
        }
        let form = try await h.request(.PATCH, h.api("/items/idle-task"), json: #"{"lock":false}"#, contentType: "text/plain")
        #expect(form.status == 415)

        let resumed = try await h.request(.POST, h.api("/items/idle-task/resume"))
        #expect(resumed.status == 200)
        _ = try await h.eventually("cached") { try h.items.item("idle-task")?.state == .cached ? true : nil }

        let kept = try await h.request(.DELETE, h.api("/items/idle-task?keepMetadata=true"))
        #expect(kept.status == 200 && kept.json["state"] as? String == "deleted")
        let again = try await h.request(.POST, h.api("/items/idle-task/resume"))
        openAPI.add("POST", "/items/{id}/resume", again)
        #expect(again.status == 200, "\(again.text)")
        let done = try await h.eventually("cached again") { () -> DownloadItem? in
            guard let item = try h.items.item("idle-task"), item.state == .cached else { return nil }
            return item
        }
        #expect(done.segmentsDone == done.segmentsTotal && done.completedAt != nil && done.startedAt != nil)
        let shown = try await h.request(.GET, h.api("/items/idle-task"))
        openAPI.add("GET", "/items/{id}", shown)

        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
        #expect(output.contains("\(openAPI.count) responses checked, 0 mismatches"))
    }
}
