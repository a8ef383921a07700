import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import Testing

/// Posters apart from their streams (PCD `deleteThumbnail:NO`, `VOCItemDownloadThumbnailOnly`): kept by a delete that
/// keeps the record, removed with the record, and stored alone for an item not downloaded yet (docs/api.md).
@Suite("Posters: kept with the record, stored alone")
struct PosterTests {
    private static let poster = [UInt8]((0..<3000).map { UInt8($0 % 251) })

    private static func posterKey(_ h: AdminHarness) throws -> CacheKey {
        CacheKey(try OriginURL(h.originURL("/poster.jpg")))
    }

    @Test("DELETE ?keepMetadata=true keeps the poster (a hit, the segments gone); DELETE without it removes the poster too")
    func deleteKeepingTheRecordKeepsThePoster() async throws {
        let h = try await AdminHarness(root: try await AdminManyItemsTests.tsStream())
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        h.origin.setBody(Self.poster, contentType: "image/jpeg", for: "/poster.jpg")
        let created = try await h.request(
            .POST, h.api("/items"),
            json: #"{"url":"\#(h.originURL("/master.m3u8"))","seconds":2,"id":"k1","poster":"\#(h.originURL("/poster.jpg"))","lock":true}"#)
        #expect(created.status == 201, "\(created.text)")
        _ = try await h.eventually("the item to settle") { try h.items.require("k1").state == .partiallyCached ? true : nil }
        let segments = try h.items.resources("k1").filter { $0.kind == CacheObjectKind.segment.rawValue }
        #expect(!segments.isEmpty)

        let deleted = try await h.request(.DELETE, h.api("/items/k1?keepMetadata=true"))
        openAPI.add("DELETE", "/items/{id}", deleted)
        #expect(deleted.status == 200, "\(deleted.text)")
        #expect(deleted.json["state"] as? String == "deleted")
        let posterPath = try #require(deleted.json["posterPath"] as? String)
        // The segments are gone, the poster stays, unlocked (no live item lists it), and is served from the cache.
        for segment in segments { #expect(h.store.lookup(CacheKey(storedValue: segment.key)) == nil) }
        let kept = try #require(h.store.lookup(try Self.posterKey(h)))
        #expect(!kept.locked)
        let served = try await h.request(.GET, h.base + posterPath)
        #expect(served.status == 200 && served.body == Self.poster)
        #expect(served.headers.first(name: "X-Cache")?.hasPrefix("HIT") == true, "\(served.headers)")
        #expect(h.origin.requests(matching: "/poster.jpg").count == 1)

        // Resumed: the stream again, the poster not fetched twice.
        #expect(try await h.request(.POST, h.api("/items/k1/resume")).status == 200)
        _ = try await h.eventually("the item to settle again") { try h.items.require("k1").state == .partiallyCached ? true : nil }
        #expect(h.origin.requests(matching: "/poster.jpg").count == 1)

        // Removed with its record: the poster goes too.
        let removed = try await h.request(.DELETE, h.api("/items/k1"))
        #expect(removed.status == 204, "\(removed.text)")
        #expect(h.store.lookup(try Self.posterKey(h)) == nil)
        let (status, output) = try await openAPI.validate()
        #expect(status == 0, "\(output)")
        await h.shutdown()
    }

    @Test("posterOnly: the item is created ready with its poster alone stored; resume downloads the stream; bad uses are 400")
    func posterOnlyStoresThePosterAlone() async throws {
        let h = try await AdminHarness(root: try await AdminManyItemsTests.tsStream())
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        h.origin.setBody(Self.poster, contentType: "image/jpeg", for: "/poster.jpg")
        let created = try await h.request(
            .POST, h.api("/items"),
            json:
                #"{"url":"\#(h.originURL("/master.m3u8"))","seconds":2,"id":"p1","poster":"\#(h.originURL("/poster.jpg"))","posterOnly":true}"#
        )
        openAPI.add("POST", "/items", created)
        #expect(created.status == 201, "\(created.text)")
        #expect(created.json["state"] as? String == "ready")
        #expect(created.json["posterError"] == nil)
        let posterPath = try #require(created.json["posterPath"] as? String)
        // Stored before the answer; nothing of the stream asked for.
        #expect(h.store.lookup(try Self.posterKey(h))?.size == Int64(Self.poster.count))
        #expect(h.origin.requests(matching: "/poster.jpg").count == 1)
        #expect(h.origin.requests(containing: ".m3u8").isEmpty, "\(h.origin.requests.map(\.path))")
        #expect(try h.items.require("p1").state == .ready)
        let served = try await h.request(.GET, h.base + posterPath)
        #expect(served.status == 200 && served.body == Self.poster)
        #expect(served.headers.first(name: "X-Cache")?.hasPrefix("HIT") == true, "\(served.headers)")

        let resumed = try await h.request(.POST, h.api("/items/p1/resume"))
        #expect(resumed.status == 200, "\(resumed.text)")
        _ = try await h.eventually("the stream to download") { try h.items.require("p1").state == .partiallyCached ? true : nil }
        #expect(h.origin.requests(matching: "/poster.jpg").count == 1, "the poster stored alone counts for the item")
        #expect(try h.items.resources("p1").contains { $0.key == (try Self.posterKey(h)).value && $0.done })

        // A poster the origin refuses: the item exists, ready, with the reason.
        let refused = try await h.request(
            .POST, h.api("/items"),
            json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"p2","poster":"\#(h.originURL("/none.jpg"))","posterOnly":true}"#)
        openAPI.add("POST", "/items", refused)
        #expect(refused.status == 201, "\(refused.text)")
        #expect(refused.json["state"] as? String == "ready")
        #expect(refused.json["posterError"] is String, "\(refused.text)")

        for bad in [
            #"{"url":"\#(h.originURL("/master.m3u8"))","posterOnly":true}"#,
            #"{"url":"\#(h.originURL("/master.m3u8"))","poster":"\#(h.originURL("/poster.jpg"))","posterOnly":true,"start":true}"#,
            #"{"url":"\#(h.originURL("/master.m3u8"))","poster":"\#(h.originURL("/poster.jpg"))","posterOnly":"yes"}"#,
        ] {
            let answer = try await h.request(.POST, h.api("/items"), json: bad)
            openAPI.add("POST", "/items", answer)
            #expect(answer.status == 400, "\(bad): \(answer.text)")
        }
        let array = try await h.request(
            .POST, h.api("/items"),
            json: #"[{"url":"\#(h.originURL("/master.m3u8?a"))","poster":"\#(h.originURL("/poster.jpg"))","posterOnly":true}]"#)
        #expect("\(array.text)".contains("posterOnly"), "\(array.text)")
        let (status, output) = try await openAPI.validate()
        #expect(status == 0, "\(output)")
        await h.shutdown()
    }
}
