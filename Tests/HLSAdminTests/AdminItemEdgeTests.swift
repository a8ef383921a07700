import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

/// The admin API's item endpoints at their edges (api.md): ids in paths are percent-decoded and `.`/`..` are no
/// ids, `keepMetadata` takes only a boolean, an expired item says why in `message`, and a deleted or expired item
/// cannot be locked or unlocked (409).
@Suite("Admin API: item ids, flags and settled items")
struct AdminItemEdgeTests {
    @Test("ids: . and .. are refused, a percent-encoded id in a path is decoded")
    func ids() async throws {
        let h = try await AdminHarness(root: try await AdminItemsTests.tsStream())
        defer { h.shutdownLater() }
        let master = h.originURL("/master.m3u8")
        for id in [".", ".."] {
            let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(master)","id":"\#(id)","seconds":2}"#)
            #expect(created.status == 400, "id \(id): HTTP clients normalise it out of /items/\(id)/lock")
            #expect(try h.items.item(id) == nil)
        }
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(master)","id":"a.b-c","seconds":2}"#)
        #expect(created.status == 201)
        let shown = try await h.request(.GET, h.api("/items/a%2Eb%2Dc"))
        #expect(shown.status == 200 && shown.json["id"] as? String == "a.b-c", "the id segment is percent-decoded (it was 404)")
        let locked = try await h.request(.POST, h.api("/items/a%2eb-c/lock"))
        #expect(locked.status == 200 && locked.json["locked"] as? Bool == true)
        // Sent as written (an HTTP client would escape the `%`).
        let malformed = try await RawSocket.exchange(
            port: h.port, Array("GET /api/v1/items/a%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(malformed.hasPrefix("HTTP/1.1 400"), "\(malformed.prefix(80))")
        await h.shutdown()
    }

    @Test("through: a balancer's base URL is recorded with the item and shown; anything else is 400 naming the field")
    func through() async throws {
        let h = try await AdminHarness(root: try await AdminItemsTests.tsStream())
        defer { h.shutdownLater() }
        let master = h.originURL("/master.m3u8")
        for bad in ["http://127.0.0.1:9/path", "not a url", "http://127.0.0.1:9/?q=1"] {
            let refused = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(master)","through":"\#(bad)","start":false}"#)
            #expect(refused.status == 400 && refused.text.contains("through"), "\(bad): \(refused.status) \(refused.text)")
        }
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(master)","id":"via","through":"http://127.0.0.1:9/","start":false}"#)
        #expect(created.status == 201, "\(created.text)")
        #expect(created.json["through"] as? String == "http://127.0.0.1:9")
        #expect(try h.items.item("via")?.through == "http://127.0.0.1:9")
        await h.shutdown()
    }

    @Test("DELETE ?keepMetadata= takes true/false/1/0 only; expired items carry a message; deleted and expired items cannot be locked")
    func flagsAndSettledItems() async throws {
        let h = try await AdminHarness(root: try await AdminItemsTests.tsStream())
        defer { h.shutdownLater() }
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/v0/index.m3u8"))","id":"k","seconds":2}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("k settles") { try h.items.item("k")?.state == .partiallyCached ? true : nil }

        let yes = try await h.request(.DELETE, h.api("/items/k?keepMetadata=yes"))
        #expect(yes.status == 400, "an unrecognised boolean is refused, not taken as false (it purged the item)")
        #expect(try h.items.item("k")?.state == .partiallyCached)
        let kept = try await h.request(.DELETE, h.api("/items/k?keepMetadata=1"))
        #expect(kept.status == 200 && kept.json["state"] as? String == "deleted")
        for action in ["lock", "unlock"] {
            let refused = try await h.request(.POST, h.api("/items/k/\(action)"))
            #expect(refused.status == 409 && refused.json["error"] as? String == "invalidState", "\(action) a deleted item")
        }

        // Expired by the server's own sweep.
        try h.items.insert(DownloadItem(id: "e", url: h.originURL("/v1/index.m3u8"), expiresAt: Date().addingTimeInterval(-1)))
        let expired = try await h.eventually("e expires") { () -> [String: Any]? in
            let shown = try await h.request(.GET, h.api("/items/e"))
            return shown.json["state"] as? String == "expired" ? shown.json : nil
        }
        #expect(expired["error"] as? String == "expired")
        #expect((expired["message"] as? String)?.contains("expired at") == true, "api.md: message says why it expired")
        let lock = try await h.request(.POST, h.api("/items/e/lock"))
        #expect(lock.status == 409, "lock an expired item")
        #expect(try h.items.item("e")?.locked == false)
        await h.shutdown()
    }
}
