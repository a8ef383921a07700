import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

@Suite("Admin API: many items in one POST, an absolute expiry at creation")
struct AdminBulkCreateTests {
    /// An ISO 8601 date of the API (fractional seconds).
    static func date(_ value: Any?) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return (value as? String).flatMap(formatter.date(from:))
    }

    @Test(
        "POST /items with an array: created, exists (id or URL) and refused per entry; the created ones download; responses match the OpenAPI spec"
    )
    func arrayOfItems() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let events = EventRecorder(client: h.client, url: h.api("/events"))
        _ = try await h.eventually("the subscriber") { h.hub.subscriberCount == 1 ? true : nil }

        let master = h.originURL("/master.m3u8")
        let media = h.originURL("/v0/index.m3u8")
        let later = Date().addingTimeInterval(3 * 86400)
        let laterText = ISO8601DateFormatter().string(from: later)
        let body = """
            [{"url":"\(master)","id":"bulk-a","seconds":2},
             {"url":"\(media)","seconds":2,"title":"Media only"},
             {"url":"ftp://example.com/x.m3u8"},
             {"url":"\(master)","id":"bulk-a"},
             {"url":"\(media)"},
             {"url":"\(master)","id":"bulk-past","expiresAt":"2001-01-01T00:00:00Z"},
             {"url":"\(master)","id":"bulk-c","seconds":2,"expiresAt":"\(laterText)","start":false},
             "not an object",
             {"url":"\(master)","dryRun":true}]
            """
        let answer = try await h.request(.POST, h.api("/items"), json: body)
        openAPI.add("POST", "/items", answer)
        #expect(answer.status == 200, "\(answer.text)")
        let results = try #require(answer.json["results"] as? [[String: Any]])
        #expect(
            results.map { $0["result"] as? String } == [
                "created", "created", "refused", "exists", "exists", "refused", "created", "refused", "refused",
            ])
        #expect(results.map { $0["index"] as? Int } == Array(0..<9))
        #expect(answer.json["created"] as? Int == 3 && answer.json["exists"] as? Int == 2 && answer.json["refused"] as? Int == 4)
        let mediaID = try #require(results[1]["id"] as? String)
        // Without an id, an entry is the item of its URL when one is recorded (here the entry before it).
        #expect(results[4]["id"] as? String == mediaID)
        #expect(results[3]["id"] as? String == "bulk-a")
        #expect(results[2]["error"] as? String == "badRequest")
        #expect((results[5]["message"] as? String)?.contains("in the past") == true)
        #expect((results[8]["message"] as? String)?.contains("dryRun") == true)
        #expect((results[1]["item"] as? [String: Any])?["title"] as? String == "Media only")
        #expect(try h.items.item("bulk-past") == nil)
        let c = try h.items.require("bulk-c")
        #expect(c.state == .ready)
        #expect(abs((c.expiresAt?.timeIntervalSince1970 ?? 0) - later.timeIntervalSince1970.rounded(.down)) < 1)
        #expect(try h.items.items().count == 3)

        // The created ones are downloaded by the server's scheduler, as single POSTs are.
        _ = try await h.eventually("bulk-a to settle") { events.states(of: "bulk-a").last == "partiallyCached" ? true : nil }
        _ = try await h.eventually("the media item to settle") {
            ["partiallyCached", "cached"].contains(events.states(of: mediaID).last ?? "") ? true : nil
        }
        #expect(events.states(of: "bulk-a").first == "queued")
        let shown = try await h.request(.GET, h.api("/items/bulk-c"))
        openAPI.add("GET", "/items/{id}", shown)
        #expect(Self.date(shown.json["expiresAt"]) == c.expiresAt)

        // The same list again: nothing new.
        let again = try await h.request(.POST, h.api("/items"), json: body)
        openAPI.add("POST", "/items", again)
        #expect(again.json["created"] as? Int == 0 && again.json["exists"] as? Int == 5)
        #expect(try h.items.items().count == 3)

        // Whole-request refusals: an empty array, one too large.
        let empty = try await h.request(.POST, h.api("/items"), json: "[]")
        openAPI.add("POST", "/items", empty)
        #expect(empty.status == 400)
        let many = "[" + Array(repeating: #"{"url":"\#(master)"}"#, count: AdminAPI.maxBulkItems + 1).joined(separator: ",") + "]"
        let tooMany = try await h.request(.POST, h.api("/items"), json: many)
        #expect(tooMany.status == 400)
        #expect(try h.items.items().count == 3)

        for event in events.events { openAPI.add(event: event) }
        await events.stop()
        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
    }

    @Test("POST /items with expiresAt: the item expires then; a past date, a bad date or both expires and expiresAt are 400")
    func absoluteExpiryAtCreation() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let master = h.originURL("/master.m3u8")
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(master)","id":"at","seconds":2,"expiresAt":"2099-06-01T12:00:00Z","start":false}"#)
        openAPI.add("POST", "/items", created)
        #expect(created.status == 201)
        #expect(Self.date(created.json["expiresAt"]) == ISO8601DateFormatter().date(from: "2099-06-01T12:00:00Z"))
        #expect(try h.items.require("at").expiresAt == ISO8601DateFormatter().date(from: "2099-06-01T12:00:00Z"))
        for (json, fragment) in [
            (#"{"url":"\#(master)","expiresAt":"2020-01-01T00:00:00Z"}"#, "in the past"),
            (#"{"url":"\#(master)","expiresAt":"tomorrow"}"#, "ISO 8601"),
            (#"{"url":"\#(master)","expiresAt":"2099-01-01T00:00:00Z","expires":"7d"}"#, "not both"),
        ] {
            let refused = try await h.request(.POST, h.api("/items"), json: json)
            openAPI.add("POST", "/items", refused)
            #expect(refused.status == 400)
            #expect((refused.json["message"] as? String)?.contains(fragment) == true, "\(refused.text)")
        }
        #expect(try h.items.items().count == 1)
        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
    }
}
