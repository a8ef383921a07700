import Foundation
import HLSAdmin
import HLSCrypto
import HLSDownloader
import HLSTestSupport
import Logging
import NIOConcurrencyHelpers
import NIOHTTP1
import NIOPosix
import Testing

/// Managing many items over the API (issue 27): metadata, filters, sorting, pages, batch actions, the dry run, an
/// item's keys, the download policies as the API shows them, and webhooks. Every response is checked against
/// docs/openapi.yaml.
@Suite("Admin API: managing many items")
struct AdminManyItemsTests {
    static func tsStream() async throws -> URL {
        try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
    }

    private func ids(_ response: AdminHarness.Response) -> [String] {
        (response.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    private func expectValid(_ openAPI: OpenAPIRecords) async throws {
        let (status, output) = try await openAPI.validate()
        #expect(status == 0, "\(output)")
    }

    @Test("Title, tags, poster (stored with the item, served through the proxy) and the caller's JSON; PATCH changes them")
    func metadataAndPoster() async throws {
        let h = try await AdminHarness(root: try await Self.tsStream())
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let poster = [UInt8]((0..<3000).map { UInt8($0 % 251) })
        h.origin.setBody(poster, contentType: "image/jpeg", for: "/poster.jpg")
        let body = #"""
            {"url":"\#(h.originURL("/master.m3u8"))","seconds":2,"id":"m1","title":"Lesson 1","tags":["physics","week1","physics"],
             "poster":"\#(h.originURL("/poster.jpg"))","meta":{"course":12,"room":"B","list":[1,2]},
             "rate":"200MiB","dailyLimit":"500MiB"}
            """#
        let created = try await h.request(.POST, h.api("/items"), json: body)
        openAPI.add("POST", "/items", created)
        #expect(created.status == 201, "\(created.text)")
        #expect(created.json["title"] as? String == "Lesson 1")
        #expect(created.json["tags"] as? [String] == ["physics", "week1"], "duplicates dropped")
        #expect((created.json["meta"] as? [String: Any])?["room"] as? String == "B")
        // Policies per item, as PATCH and `hlscache fetch/set` set them: its own rate and daily limit.
        #expect(created.json["rate"] as? Int == 200 << 20, "\(created.text)")
        #expect(created.json["dailyLimit"] as? Int == 500 << 20, "\(created.text)")
        #expect(try h.items.require("m1").rateLimit == 200 << 20 && h.items.require("m1").dailyBytes == 500 << 20)
        let posterPath = try #require(created.json["posterPath"] as? String)
        #expect(posterPath == "/http/127.0.0.1:\(h.origin.port)/poster.jpg")

        _ = try await h.eventually("the item to settle") { try h.items.require("m1").state == .partiallyCached ? true : nil }
        #expect(h.origin.requests(matching: "/poster.jpg").count == 1, "the poster is prewarmed with the item")
        let served = try await h.request(.GET, h.base + posterPath)
        #expect(served.status == 200 && served.body == poster)
        #expect(served.headers.first(name: "X-Cache")?.hasPrefix("HIT") == true, "\(served.headers)")
        #expect(h.origin.requests(matching: "/poster.jpg").count == 1, "served from the cache")

        let shown = try await h.request(.GET, h.api("/items/m1"))
        openAPI.add("GET", "/items/{id}", shown)
        #expect(shown.json["title"] as? String == "Lesson 1")

        let patched = try await h.request(
            .PATCH, h.api("/items/m1"),
            json: #"{"title":"Lesson one","tags":["physics"],"meta":null,"maxSize":"1GiB","window":"22:00-06:00","dailyLimit":null}"#)
        openAPI.add("PATCH", "/items/{id}", patched)
        #expect(patched.status == 200, "\(patched.text)")
        #expect(patched.json["title"] as? String == "Lesson one")
        #expect(patched.json["tags"] as? [String] == ["physics"])
        #expect(patched.json["meta"] == nil)
        #expect(patched.json["maxSize"] as? Int == 1 << 30)
        #expect(patched.json["window"] as? String == "22:00-06:00")
        #expect(patched.json["dailyLimit"] == nil && patched.json["rate"] as? Int == 200 << 20)
        let stored = try h.items.require("m1")
        #expect(stored.title == "Lesson one" && stored.metadata == nil && stored.maxBytes == 1 << 30)
        #expect(stored.dailyBytes == nil)
        let limited = try await h.request(.PATCH, h.api("/items/m1"), json: #"{"dailyLimit":"1GiB"}"#)
        openAPI.add("PATCH", "/items/{id}", limited)
        #expect(limited.status == 200 && limited.json["dailyLimit"] as? Int == 1 << 30, "\(limited.text)")

        for bad in [
            #"{"url":"\#(h.originURL("/x.m3u8"))","tags":["a,b"]}"#, #"{"url":"\#(h.originURL("/x.m3u8"))","meta":[1]}"#,
            #"{"url":"\#(h.originURL("/x.m3u8"))","poster":"ftp://x/y.jpg"}"#,
            #"{"url":"\#(h.originURL("/x.m3u8"))","window":"25:00-01:00"}"#,
            #"{"url":"\#(h.originURL("/x.m3u8"))","title":""}"#,
            #"{"url":"\#(h.originURL("/x.m3u8"))","dailyLimit":"lots"}"#, #"{"url":"\#(h.originURL("/x.m3u8"))","rate":0}"#,
            #"{"url":"\#(h.originURL("/x.m3u8"))","meta":{"big":"\#(String(repeating: "x", count: 17000))"}}"#,
        ] {
            let refused = try await h.request(.POST, h.api("/items"), json: bad)
            openAPI.add("POST", "/items", refused)
            #expect(refused.status == 400, "\(bad.prefix(120)): \(refused.text)")
        }
        let badPatch = try await h.request(.PATCH, h.api("/items/m1"), json: #"{"tags":"physics"}"#)
        openAPI.add("PATCH", "/items/{id}", badPatch)
        #expect(badPatch.status == 400)
        try await expectValid(openAPI)
        await h.shutdown()
    }

    @Test("A poster the origin refuses (404) does not fail its item: downloaded without it, posterError says why")
    func aRefusedPosterLeavesTheItemWithoutIt() async throws {
        let h = try await AdminHarness(root: try await Self.tsStream())
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let body = #"{"url":"\#(h.originURL("/master.m3u8"))","seconds":2,"id":"p1","poster":"\#(h.originURL("/no-such-poster.jpg"))"}"#
        let created = try await h.request(.POST, h.api("/items"), json: body)
        #expect(created.status == 201, "\(created.text)")
        let settled = try await h.eventually("the item to settle") { () -> DownloadItem? in
            let item = try h.items.require("p1")
            return item.state.isRunnable || item.state == .downloading ? nil : item
        }
        #expect(settled.state == .partiallyCached, "\(settled.state) \(settled.errorCode ?? "") \(settled.errorMessage ?? "")")
        #expect(settled.errorCode == nil)
        #expect(h.origin.requests(matching: "/no-such-poster.jpg").count >= 1, "the poster was asked for")
        let shown = try await h.request(.GET, h.api("/items/p1"))
        openAPI.add("GET", "/items/{id}", shown)
        let reason = try #require(shown.json["posterError"] as? String, "\(shown.text)")
        #expect(reason.contains("404") || reason.lowercased().contains("not found"), "\(reason)")
        #expect(shown.json["posterPath"] == nil, "no path that would not answer")
        #expect(shown.json["posterURL"] as? String == h.originURL("/no-such-poster.jpg"))
        #expect(shown.json["playableOffline"] as? Bool == true, "the stream plays offline without its artwork")
        #expect(shown.json["resources"] as? Int == shown.json["resourcesDone"] as? Int, "the poster is not a resource it waits for")
        let listed = try await h.request(.GET, h.api("/items?limit=10"))
        openAPI.add("GET", "/items", listed)

        // Another poster, which the origin has: the reason goes with the old one, and the new one is served.
        h.origin.setBody([UInt8](repeating: 7, count: 500), contentType: "image/jpeg", for: "/poster2.jpg")
        let patched = try await h.request(.PATCH, h.api("/items/p1"), json: #"{"poster":"\#(h.originURL("/poster2.jpg"))"}"#)
        openAPI.add("PATCH", "/items/{id}", patched)
        #expect(patched.status == 200 && patched.json["posterError"] == nil, "\(patched.text)")
        let path = try #require(patched.json["posterPath"] as? String)
        #expect(try await h.request(.GET, h.base + path).status == 200)
        try await expectValid(openAPI)
        await h.shutdown()
    }

    @Test("GET /items filters by several states, tag, played and URL, sorts, and pages with a total")
    func filtersSortAndPages() async throws {
        let h = try await AdminHarness(root: try await Self.tsStream())
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        // Settled items recorded directly (the scheduler leaves them alone), created a second apart.
        let start = Date(timeIntervalSince1970: 1_780_000_000)
        let states: [ItemState] = [.paused, .failed, .cached, .paused, .failed, .cached, .paused, .cached]
        for (index, state) in states.enumerated() {
            var item = DownloadItem(
                id: "n\(index)", url: h.originURL("/stream\(index)/master.m3u8"), now: start.addingTimeInterval(Double(index)))
            item.state = state
            item.tags = index % 2 == 0 ? ["even"] : ["odd", "chem"]
            item.title = "Title \(7 - index)"
            try h.items.insert(item)
        }
        try h.items.recordPlayback("n2", start: 0, end: 4)

        func list(_ query: String) async throws -> AdminHarness.Response {
            let response = try await h.request(.GET, h.api("/items" + query))
            openAPI.add("GET", "/items", response)
            return response
        }
        let all = try await list("")
        #expect(ids(all) == (0..<8).map { "n\($0)" }, "oldest first")
        #expect(all.json["total"] as? Int == 8 && all.json["offset"] as? Int == 0 && all.json["nextOffset"] == nil)
        #expect(ids(try await list("?state=paused,failed")) == ["n0", "n1", "n3", "n4", "n6"])
        #expect(ids(try await list("?state=paused&state=cached")) == ["n0", "n2", "n3", "n5", "n6", "n7"])
        #expect(ids(try await list("?tag=chem")) == ["n1", "n3", "n5", "n7"])
        #expect(ids(try await list("?tag=chem,odd&state=failed")) == ["n1"])
        #expect(ids(try await list("?tag=nothing")).isEmpty)
        #expect(ids(try await list("?played=true")) == ["n2"])
        #expect(ids(try await list("?played=false")).count == 7)
        #expect(ids(try await list("?url=stream3")) == ["n3"])
        #expect(ids(try await list("?sort=title")) == (0..<8).reversed().map { "n\($0)" })
        #expect(ids(try await list("?sort=-createdAt&limit=3")) == ["n7", "n6", "n5"])

        let page = try await list("?sort=id&limit=3&offset=3")
        #expect(ids(page) == ["n3", "n4", "n5"])
        #expect(page.json["total"] as? Int == 8 && page.json["limit"] as? Int == 3 && page.json["nextOffset"] as? Int == 6)
        let last = try await list("?sort=id&limit=3&offset=6")
        #expect(ids(last) == ["n6", "n7"] && last.json["nextOffset"] == nil)
        let filteredPage = try await list("?state=cached&limit=2")
        #expect(
            ids(filteredPage) == ["n2", "n5"] && filteredPage.json["total"] as? Int == 3 && filteredPage.json["nextOffset"] as? Int == 2)

        for bad in ["?state=bogus", "?sort=size", "?limit=0", "?limit=1001", "?offset=-1", "?played=maybe", "?tags=x"] {
            let refused = try await list(bad)
            #expect(refused.status == 400, "\(bad): \(refused.status) \(refused.text)")
        }
        try await expectValid(openAPI)
        await h.shutdown()
    }

    @Test("Cursor paging: items created or deleted between pages neither skip nor repeat one, in every sort (offsets do)")
    func cursorPagesSurviveChanges() async throws {
        let h = try await AdminHarness(root: try await Self.tsStream())
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        func list(_ query: String) async throws -> AdminHarness.Response {
            let response = try await h.request(.GET, h.api("/items" + query))
            openAPI.add("GET", "/items", response)
            return response
        }
        // Created at fractional times (the cursor must carry the exact double), titles and expiries with gaps (NULLs sort
        // last), byte counts with ties (broken by id).
        let start = 1_780_000_000.123456
        let expiryBase = Date().addingTimeInterval(30 * 86400)
        func insert(_ id: String, _ index: Int, createdAt: Double) throws {
            var item = DownloadItem(id: id, url: h.originURL("/s/\(id).m3u8"), now: Date(timeIntervalSince1970: createdAt))
            item.state = .paused
            item.title = index % 3 == 0 ? nil : "Title \(index % 5)"
            // In the future: an expired item changes (state, updatedAt, bytes) under the pages, which is not what is tested.
            item.expiresAt = index % 4 == 0 ? nil : expiryBase.addingTimeInterval(Double(index % 3) * 60)
            item.bytesDone = Int64(index % 4) * 1000
            try h.items.insert(item)
        }
        for sort in [
            "createdAt", "-createdAt", "updatedAt", "title", "-title", "state", "bytes", "-bytes", "expiresAt", "-expiresAt", "id", "-id",
        ] {
            for item in try h.items.items() { try h.items.purge(item.id) }
            for index in 0..<12 { try insert("i\(index)", index, createdAt: start + Double(index) * 1.1) }
            let first = try await list("?sort=\(sort)&limit=4")
            #expect(first.status == 200, "\(sort): \(first.text)")
            var seen = ids(first)
            var cursor = first.json["nextCursor"] as? String
            #expect(cursor != nil && first.json["nextOffset"] as? Int == 4, "\(sort)")
            // Between the pages: one item of the first page and one not read yet go; three new ones come (one sorting
            // before the cursor, the others anywhere).
            let gone = [seen[1], ids(try await list("?sort=\(sort)"))[9]]
            for id in gone { try h.items.purge(id) }
            for (offset, index) in [0, 7, 13].enumerated() { try insert("new\(offset)", index, createdAt: start + 100 + Double(offset)) }
            var pages = 1
            var pageLog: [String] = [ids(first).joined(separator: ",")]
            while let next = cursor, pages < 20 {
                let page = try await list(
                    "?sort=\(sort)&limit=4&after=\(next.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? next)")
                #expect(page.status == 200, "\(sort): \(page.text)")
                #expect(page.json["offset"] == nil && page.json["nextOffset"] == nil, "cursor pages have no offsets")
                #expect(page.json["total"] as? Int == 13, "\(sort): the total counts every item now")
                seen += ids(page)
                pageLog.append(
                    ids(page).joined(separator: ",") + " after "
                        + (Data(
                            base64Encoded: next.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/").padding(
                                toLength: (next.count + 3) / 4 * 4, withPad: "=", startingAt: 0)
                        ).map { String(decoding: $0, as: UTF8.self) } ?? next))
                cursor = page.json["nextCursor"] as? String
                pages += 1
            }
            #expect(Set(seen).count == seen.count, "\(sort): no item repeated: \(seen) (pages: \(pageLog))")
            let survivors = (0..<12).map { "i\($0)" }.filter { !gone.contains($0) }
            #expect(Set(survivors).isSubset(of: Set(seen)), "\(sort): none skipped: missing \(Set(survivors).subtracting(seen).sorted())")
            // In the listing's order: what was read is the full listing now, less the item read then removed and the new
            // items that sort before the cursor.
            let now = ids(try await list("?sort=\(sort)"))
            #expect(seen.filter { $0 != gone[0] } == now.filter { Set(seen).contains($0) }, "\(sort): in order")
        }

        // The same changes with offsets: the page after a removal skips an item.
        for item in try h.items.items() { try h.items.purge(item.id) }
        for index in 0..<12 { try insert("i\(index)", index, createdAt: start + Double(index) * 1.1) }
        let first = try await list("?limit=4")
        let cursor = try #require(first.json["nextCursor"] as? String)
        try h.items.purge(ids(first)[1])
        let byOffset = ids(try await list("?limit=4&offset=4"))
        #expect(byOffset.first == "i5", "an offset shifts: i4 is skipped (\(byOffset))")
        let byCursor = ids(try await list("?limit=4&after=" + cursor))
        #expect(byCursor == ["i4", "i5", "i6", "i7"], "the cursor goes on after i3: \(byCursor)")

        for bad in [
            "?after=garbage", "?after=" + (try #require(try await list("?limit=2").json["nextCursor"] as? String)) + "&sort=-createdAt",
            "?after=" + (try #require(try await list("?limit=2").json["nextCursor"] as? String)) + "&offset=2",
        ] {
            let refused = try await list(bad)
            #expect(refused.status == 400, "\(bad): \(refused.text)")
        }
        try await expectValid(openAPI)
        await h.shutdown()
    }

    @Test("POST /items/batch: pause, lock, delete several items by ids or by a filter, with a result per item")
    func batchActions() async throws {
        let h = try await AdminHarness(root: try await Self.tsStream())
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        for index in 0..<5 {
            var item = DownloadItem(id: "b\(index)", url: h.originURL("/b\(index)/master.m3u8"))
            item.state = index < 3 ? .paused : .cached
            item.tags = index < 2 ? ["gone"] : ["kept"]
            try h.items.insert(item)
        }
        func batch(_ json: String) async throws -> AdminHarness.Response {
            let response = try await h.request(.POST, h.api("/items/batch"), json: json)
            openAPI.add("POST", "/items/batch", response)
            return response
        }
        let locked = try await batch(#"{"action":"lock","ids":["b2","b3","missing","b2"]}"#)
        #expect(locked.status == 200, "\(locked.text)")
        let results = locked.json["results"] as? [[String: Any]] ?? []
        #expect(results.map { $0["id"] as? String } == ["b2", "b3", "missing"], "each id once, in order")
        #expect(results.map { $0["ok"] as? Bool } == [true, true, false])
        #expect(results[2]["error"] as? String == "notFound")
        #expect(locked.json["succeeded"] as? Int == 2 && locked.json["failed"] as? Int == 1)
        #expect(try h.items.require("b2").locked && h.items.require("b3").locked)

        let pause = try await batch(#"{"action":"pause","filter":{"state":"cached"}}"#)
        #expect(
            (pause.json["results"] as? [[String: Any]])?.allSatisfy {
                $0["ok"] as? Bool == false && $0["error"] as? String == "invalidState"
            } == true)
        #expect(pause.json["failed"] as? Int == 2)

        let deleted = try await batch(#"{"action":"delete","filter":{"tag":["gone"]}}"#)
        #expect(deleted.json["succeeded"] as? Int == 2)
        #expect(try h.items.item("b0") == nil && h.items.item("b1") == nil)
        let kept = try await batch(#"{"action":"delete","filter":{"state":["paused"]},"keepMetadata":true}"#)
        #expect((kept.json["results"] as? [[String: Any]])?.map { $0["state"] as? String } == ["deleted"])
        #expect(try h.items.require("b2").state == .deleted)

        for bad in [
            #"{"action":"explode","ids":["b3"]}"#, #"{"action":"lock"}"#, #"{"action":"lock","ids":["b3"],"filter":{}}"#,
            #"{"action":"lock","ids":[]}"#, #"{"action":"lock","filter":{"colour":"red"}}"#,
            #"{"action":"lock","ids":["b3"],"keepMetadata":true}"#,
        ] {
            let refused = try await batch(bad)
            #expect(refused.status == 400, "\(bad): \(refused.text)")
        }
        try await expectValid(openAPI)
        await h.shutdown()
    }

    @Test("POST /items with dryRun answers the estimate and records nothing; an item's keys are listed and renewed")
    func dryRunAndItemKeys() async throws {
        let root = try await Streams.stream("aes128-rotation") { try FFmpeg.makeAES128(in: $0) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let url = h.originURL("/index.m3u8")
        let estimate = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(url)","dryRun":true}"#)
        openAPI.add("POST", "/items", estimate)
        #expect(estimate.status == 200, "\(estimate.text)")
        #expect(estimate.json["dryRun"] as? Bool == true && estimate.json["fits"] as? Bool == true)
        #expect((estimate.json["segments"] as? Int ?? 0) >= 4)
        #expect((estimate.json["renditions"] as? [[String: Any]])?.count == 1)
        let tooLarge = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/index.m3u8"))","dryRun":true,"maxSize":1}"#)
        openAPI.add("POST", "/items", tooLarge)
        #expect(tooLarge.status == 200)
        // No BANDWIDTH and no byte ranges: no estimate to refuse; with a master, see DownloadPolicyTests.
        #expect(tooLarge.json["fits"] as? Bool == (tooLarge.json["estimatedBytes"] == nil))
        let missing = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/missing.m3u8"))","dryRun":true}"#)
        openAPI.add("POST", "/items", missing)
        #expect(missing.status == 404, "\(missing.text)")
        #expect(try h.items.list(ItemQuery()).total == 0, "a dry run records nothing")

        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(url)","id":"aes"}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("the item to be cached") { try h.items.require("aes").state == .cached ? true : nil }
        let keys = try await h.request(.GET, h.api("/items/aes/keys"))
        openAPI.add("GET", "/items/{id}/keys", keys)
        let list = keys.json["keys"] as? [[String: Any]] ?? []
        #expect(list.count == 2, "\(keys.text)")
        #expect(list.allSatisfy { $0["state"] as? String == "valid" })
        #expect(!keys.text.contains("key0.key"), "never the key URL")

        let fetchedBefore = h.origin.requests(matching: "/key0.key").count
        let renewed = try await h.request(.POST, h.api("/items/aes/keys/renew"))
        openAPI.add("POST", "/items/{id}/keys/renew", renewed)
        #expect(renewed.status == 200, "\(renewed.text)")
        #expect((renewed.json["keys"] as? [[String: Any]])?.map { $0["renewed"] as? Bool } == [true, true])
        #expect(h.origin.requests(matching: "/key0.key").count == fetchedBefore + 1, "fetched again from the origin")
        let keyID = try #require(list.first?["id"] as? String)
        let one = try await h.request(.POST, h.api("/keys/\(keyID)/renew"))
        openAPI.add("POST", "/keys/{keyId}/renew", one)
        #expect(one.status == 200 && one.json["id"] as? String == keyID)
        let unknown = try await h.request(.POST, h.api("/keys/\(String(repeating: "0", count: 32))/renew"))
        openAPI.add("POST", "/keys/{keyId}/renew", unknown)
        #expect(unknown.status == 404)
        let noItem = try await h.request(.GET, h.api("/items/nothing/keys"))
        openAPI.add("GET", "/items/{id}/keys", noItem)
        #expect(noItem.status == 404)
        try await expectValid(openAPI)
        await h.shutdown()
    }

    @Test("Outside the download hours an item created over the API waits in idle with outsideWindow; /status shows the policies")
    func windowClosedHoldsAnItemCreatedOverTheAPI() async throws {
        let utc = TimeZone(identifier: "UTC")!
        let noon = ISO8601DateFormatter().date(from: "2026-06-01T12:00:00Z")!
        let h = try await AdminHarness(
            root: try await Self.tsStream(),
            downloader: {
                $0.policies.window = DownloadWindow(parsing: "22:00-06:00")
                $0.policies.dailyBytes = 1 << 30
                $0.policies.timeZone = utc
                $0.policies.clock = { noon }
            })
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"later"}"#)
        #expect(created.status == 201)
        let held = try await h.eventually("the item held back") { () -> AdminHarness.Response? in
            let shown = try await h.request(.GET, h.api("/items/later"))
            return shown.json["state"] as? String == "idle" ? shown : nil
        }
        openAPI.add("GET", "/items/{id}", held)
        #expect(held.json["error"] as? String == "outsideWindow")
        #expect(held.json["nextAttemptAt"] as? String == "2026-06-01T22:00:00.000Z")
        #expect(h.origin.requests.isEmpty, "nothing fetched outside the window")
        let status = try await h.request(.GET, h.api("/status"))
        openAPI.add("GET", "/status", status)
        let downloads = status.json["downloads"] as? [String: Any]
        #expect(downloads?["window"] as? String == "22:00-06:00" && downloads?["dailyLimit"] as? Int == 1 << 30)
        #expect(downloads?["today"] as? Int == 0)
        try await expectValid(openAPI)
        await h.shutdown()
    }

    @Test("Webhooks: every state change POSTed signed (HMAC-SHA256), in order, retried with back-off after 500s")
    func webhooksSignedOrderedAndRetried() async throws {
        let receiver = WebhookReceiver(failures: 3)
        try await receiver.start()
        let secret = "a-webhook-secret-of-some-length"
        let waits = NIOLockedValueBox<[Duration]>([])
        var configuration = WebhookConfiguration()
        configuration.urls = [receiver.url]
        configuration.secret = secret
        configuration.attempts = 5
        configuration.retryBaseDelay = .seconds(1)
        // The back-off is recorded, not waited: the outcome never depends on a sleep.
        configuration.sleep = { duration in waits.withLockedValue { $0.append(duration) } }
        let h = try await AdminHarness(root: try await Self.tsStream(), webhooks: configuration)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","seconds":2,"id":"hooked"}"#)
        #expect(created.status == 201)
        let accepted = try await h.eventually("the partiallyCached webhook") { () -> [WebhookReceiver.Received]? in
            let ok = receiver.requests.filter { $0.status == 204 }
            return ok.contains { $0.json["state"] as? String == "partiallyCached" } ? ok : nil
        }
        let all = receiver.requests
        for request in all {
            let signature = try #require(request.headers.first(name: "X-Hlscache-Signature"))
            #expect(signature.hasPrefix("sha256="))
            #expect(HMACSHA256.isValid(String(signature.dropFirst(7)), for: request.body, key: secret), "a valid signature")
            #expect(!HMACSHA256.isValid(String(signature.dropFirst(7)), for: request.body, key: "another-secret-of-some-length"))
            #expect(request.headers.first(name: "Content-Type") == "application/json")
            #expect(request.headers.first(name: "X-Hlscache-Event") == "state")
            openAPI.add(schema: "WebhookEvent", body: request.body)
        }
        // The first event was refused three times, then accepted: the same delivery each time, waits doubling.
        let deliveries = all.prefix(4).map { $0.headers.first(name: "X-Hlscache-Delivery") }
        #expect(all.prefix(4).map(\.status) == [500, 500, 500, 204])
        #expect(Set(deliveries).count == 1 && deliveries.first != nil, "\(deliveries)")
        #expect(all.prefix(4).map(\.body) == Array(repeating: all[0].body, count: 4), "the same signed body")
        #expect(waits.withLockedValue { $0 } == [.seconds(1), .seconds(2), .seconds(4)])
        let states = accepted.filter { $0.json["id"] as? String == "hooked" }.compactMap { $0.json["state"] as? String }
        #expect(states == ["queued", "downloading", "partiallyCached"], "\(states)")
        let sequences = accepted.compactMap { $0.json["sequence"] as? Int }
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count, "increasing: \(sequences)")
        #expect(accepted.allSatisfy { ($0.json["timestamp"] as? String).flatMap { ISO8601DateFormatter.fractional.date(from: $0) } != nil })
        // Counted once the notifier has read the answer, a moment after the receiver recorded it.
        _ = try await h.eventually("the deliveries counted") { (h.webhooks?.count(of: .delivered) ?? 0) >= accepted.count ? true : nil }
        #expect(h.webhooks?.count(of: .failed) == 0)
        #expect(h.webhooks?.count(of: .dropped) == 0)
        try await expectValid(openAPI)
        await h.shutdown()
        await receiver.stop()
    }

    @Test("Lock and unlock — through the API, or by another process on the cache — are announced as lock events")
    func lockEvents() async throws {
        let h = try await AdminHarness(root: try await Self.tsStream())
        defer { h.shutdownLater() }
        let events = EventRecorder(client: h.client, url: h.api("/events"))
        _ = try await h.eventually("the event stream") { h.hub.subscriberCount > 0 ? true : nil }
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","start":false,"id":"L"}"#)
        #expect(created.status == 201, "\(created.text)")
        _ = try await h.eventually("the item to be ready") { try h.items.require("L").state == .ready ? true : nil }
        func locks() -> [Bool] {
            events.events.filter { $0.type == "lock" && $0.json["id"] as? String == "L" }.compactMap { $0.json["locked"] as? Bool }
        }
        #expect(try await h.request(.POST, h.api("/items/L/lock")).status == 200)
        _ = try await h.eventually("the lock event") { locks() == [true] ? true : nil }
        // As `hlscache unlock L` in another process does: only items.sqlite changes; the server's poll notices.
        _ = try h.downloader.setLocked("L", false)
        _ = try await h.eventually("the unlock made elsewhere") { locks() == [true, false] ? true : nil }
        #expect(try await h.request(.PATCH, h.api("/items/L"), json: #"{"lock":true}"#).status == 200)
        _ = try await h.eventually("the lock by PATCH") { locks() == [true, false, true] ? true : nil }
        #expect(try await h.request(.POST, h.api("/items/L/lock")).status == 200)
        #expect(events.states(of: "L").filter { $0 != "queued" && $0 != "ready" }.isEmpty, "no state event for a lock")
        // Locking a locked item is not news: a later unlock is the next lock event.
        #expect(try await h.request(.POST, h.api("/items/L/unlock")).status == 200)
        _ = try await h.eventually("the unlock") { locks() == [true, false, true, false] ? true : nil }
        let openAPI = OpenAPIRecords()
        for event in events.events where event.type == "lock" { openAPI.add(event: event) }
        try await expectValid(openAPI)
        await events.stop()
        await h.shutdown()
    }

    @Test("A webhook queue that is full drops the oldest events and counts them, without waiting")
    func aFullWebhookQueueDropsAndCounts() async throws {
        var configuration = WebhookConfiguration()
        configuration.urls = ["http://127.0.0.1:9/hook"]
        configuration.secret = "a-webhook-secret-of-some-length"
        configuration.queueSize = 2
        let notifier = WebhookNotifier(
            configuration: configuration, eventLoopGroup: MultiThreadedEventLoopGroup.singleton, logger: Logger(label: "t"))
        // Not running: nothing is delivered, the queue fills.
        for index in 0..<5 { notifier.enqueue(.state(id: "i\(index)", state: .queued, error: nil)) }
        notifier.enqueue(.progress(id: "i0", bytes: 1, bytesTotal: 2, segments: 1, segmentsTotal: 2))
        #expect(notifier.count(of: .dropped) == 3, "five state events into a queue of two; progress is never sent")
        let task = Task { try? await notifier.run() }
        task.cancel()
        await task.value
    }
}

extension ISO8601DateFormatter {
    static var fractional: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
