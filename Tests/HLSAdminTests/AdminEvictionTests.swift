import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

/// Issue 25, "the truth about what is stored": a second item filling a small cache evicts the first's objects → the
/// first says so (state, counters, `playableOffline`), an SSE client sees it → `resume` restores it → ffmpeg decodes
/// it with the origin stopped, identical to the origin.
@Suite("Admin API: eviction shown on the items")
struct AdminEvictionTests {
    /// Two copies of one stream under `/a/` and `/b/` (different URLs, so different objects).
    static func twoStreams() async throws -> (root: URL, bytes: Int64) {
        let stream = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-evict-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        for copy in ["a", "b"] { try FileManager.default.copyItem(at: stream, to: root.appendingPathComponent(copy)) }
        var bytes: Int64 = 0
        for file in FileManager.default.enumerator(atPath: stream.path)?.compactMap({ $0 as? String }) ?? [] {
            guard file.hasSuffix(".ts") || file.hasSuffix(".m3u8") else { continue }
            bytes += (try FileManager.default.attributesOfItem(atPath: stream.appendingPathComponent(file).path)[.size] as? Int64) ?? 0
        }
        return (root, bytes)
    }

    @Test("a second item evicts the first: it says so, /events shows it, resume restores it, it plays offline as the origin")
    func evictionIsShownAndResumeRestores() async throws {
        let (root, bytes) = try await Self.twoStreams()
        defer { try? FileManager.default.removeItem(at: root) }
        // Room for one copy and most of a second one: the second evicts part of the first (least recently used).
        let h = try await AdminHarness(root: root, maxBytes: bytes * 17 / 10)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let direct = try await FFmpeg.frameMD5(h.originURL("/a/master.m3u8"))
        #expect(direct.count > 50)
        let events = EventRecorder(client: h.client, url: h.api("/events"))
        _ = try await h.eventually("the subscriber") { h.hub.subscriberCount == 1 ? true : nil }

        let first = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/a/master.m3u8"))","id":"first"}"#)
        #expect(first.status == 201)
        _ = try await h.eventually("the first item cached") { try h.items.item("first")?.state == .cached ? true : nil }
        let whole = try await h.request(.GET, h.api("/items/first"))
        openAPI.add("GET", "/items/{id}", whole)
        #expect(whole.json["playableOffline"] as? Bool == true, "\(whole.json)")

        let second = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/b/master.m3u8"))","id":"second"}"#)
        #expect(second.status == 201)
        _ = try await h.eventually("the second item cached") { try h.items.item("second")?.state == .cached ? true : nil }
        let evicted = try await h.eventually("the first item to say it lost objects") { () -> DownloadItem? in
            guard let item = try h.items.item("first"), item.state == .partiallyCached || item.state == .evicted else { return nil }
            return item
        }
        #expect(evicted.missingResources > 0)
        #expect(Int(evicted.bytesDone) < whole.json["bytesDone"] as? Int ?? Int.max)
        let shown = try await h.request(.GET, h.api("/items/first"))
        openAPI.add("GET", "/items/{id}", shown)
        #expect(shown.json["playableOffline"] as? Bool == false, "\(shown.json)")
        #expect((shown.json["missingResources"] as? Int ?? 0) > 0)
        _ = try await h.eventually("the evicted event") {
            events.events.contains { $0.type == "evicted" && ($0.json["id"] as? String) == "first" } ? true : nil
        }
        // A re-check against the store agrees with what the evictions reported.
        let verified = try await h.request(.POST, h.api("/items/first/verify"))
        openAPI.add("POST", "/items/{id}/verify", verified)
        let state = try #require(verified.json["state"] as? String, "\(verified.json)")
        #expect(verified.status == 200 && (state == "partiallyCached" || state == "evicted"), "\(verified.json)")
        #expect((verified.json["missingResources"] as? Int ?? 0) > 0)
        #expect(try h.items.resources("first").count { !$0.done } == verified.json["missingResources"] as? Int)
        _ = try await h.eventually("the state event") { events.states(of: "first").last == state ? true : nil }

        // Make room, then resume: what is missing is fetched again.
        #expect(try await h.request(.DELETE, h.api("/items/second")).status == 204)
        let resumed = try await h.request(.POST, h.api("/items/first/resume"))
        openAPI.add("POST", "/items/{id}/resume", resumed)
        #expect(resumed.status == 200)
        _ = try await h.eventually("the first item cached again") { try h.items.item("first")?.state == .cached ? true : nil }
        let restored = try await h.request(.GET, h.api("/items/first"))
        openAPI.add("GET", "/items/{id}", restored)
        #expect(restored.json["playableOffline"] as? Bool == true, "\(restored.json)")
        #expect(restored.json["missingResources"] == nil)

        await h.origin.stop()
        #expect(try await FFmpeg.frameMD5(h.proxyURL("/a/master.m3u8")) == direct, "offline playback differs from the origin")

        for event in events.events { openAPI.add(event: event) }
        await events.stop()
        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
        #expect(output.contains("\(openAPI.count) responses checked, 0 mismatches"))
    }
}
