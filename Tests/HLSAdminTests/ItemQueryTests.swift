import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import NIOHTTP1
import Testing

@Suite("Queries: ids=, locked=, q=, sort=completedAt, GET /tags; ls --played/--locked/--search")
struct ItemQueryTests {
    @Test("listing filters over downloaded, played and locked items, through the API and `hlscache ls`; responses match the OpenAPI spec")
    func filtersSortsAndTags() async throws {
        let root = try await AdminItemsTests.tsStream()
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        // One after the other, so their completedAt follow the same order.
        let a = try await h.request(
            .POST, h.api("/items"),
            json:
                #"{"url":"\#(h.originURL("/master.m3u8"))","id":"a","seconds":2,"variants":"worst","title":"Alpha Lecture","tags":["x","y"]}"#
        )
        #expect(a.status == 201)
        _ = try await h.eventually("a settled") { try h.items.item("a")?.state == .partiallyCached ? true : nil }
        let b = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/v0/index.m3u8"))","id":"b","title":"Beta","tags":["y"]}"#)
        #expect(b.status == 201)
        _ = try await h.eventually("b settled") { try h.items.item("b")?.state == .cached ? true : nil }
        let c = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/v1/index.m3u8"))","id":"c","lock":true,"start":false}"#)
        #expect(c.status == 201)
        // Played through the proxy: a rendition only b has (a has the 150k variant only).
        for path in ["/v0/index.m3u8", "/v0/seg003.ts"] { #expect(try await h.request(.GET, h.proxyURL(path)).status == 200) }
        _ = try await h.eventually("b's playback record") { try h.items.consumption("b") != nil ? true : nil }

        func ids(_ query: String) async throws -> [String] {
            let response = try await h.request(.GET, h.api("/items?" + query))
            openAPI.add("GET", "/items", response)
            #expect(response.status == 200, "\(query): \(response.text)")
            return (response.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        }
        #expect(try await ids("ids=c,a,nothere") == ["a", "c"])
        #expect(try await ids("locked=true") == ["c"])
        #expect(try await ids("locked=false") == ["a", "b"])
        #expect(try await ids("q=alpha") == ["a"])
        #expect(try await ids("q=V0%2FINDEX") == ["b"], "the URL, ignoring case")
        #expect(try await ids("q=e&tag=y") == ["a", "b"])
        #expect(try await ids("sort=completedAt") == ["a", "b", "c"])
        #expect(try await ids("sort=-completedAt") == ["c", "b", "a"], "not completed: last ascending, first descending")
        #expect(try await ids("sort=completedAt&limit=1&ids=a,b,c").count == 1)
        let played = try await ids("played=true")
        #expect(played == ["b"], "\(played)")
        // Cursor pages by completedAt read every item once.
        let first = try await h.request(.GET, h.api("/items?sort=-completedAt&limit=2"))
        let cursor = try #require(first.json["nextCursor"] as? String)
        #expect(try await ids("sort=-completedAt&limit=2&after=\(cursor)") == ["a"])

        for bad in ["locked=maybe", "ids=", "sort=finishedAt"] {
            let refused = try await h.request(.GET, h.api("/items?" + bad))
            openAPI.add("GET", "/items", refused)
            #expect(refused.status == 400, "\(bad)")
        }

        let tags = try await h.request(.GET, h.api("/tags"))
        openAPI.add("GET", "/tags", tags)
        #expect(tags.status == 200)
        let list = try #require(tags.json["tags"] as? [[String: Any]])
        #expect(list.map { $0["tag"] as? String } == ["x", "y"])
        #expect(list.map { $0["items"] as? Int } == [1, 2])

        // The same filters from the command line, on the server's cache directory.
        func ls(_ arguments: [String]) async throws -> [String] {
            let run = try await CLI.run(["ls", "--json"] + arguments + ["--cache-dir", h.cacheDirectory.path])
            #expect(run.status == 0, "\(arguments): \(run.stderr)")
            return run.stdout.split(separator: "\n").compactMap {
                (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["id"] as? String
            }
        }
        #expect(try await ls(["--played"]) == ["b"])
        #expect(try await ls(["--never-played"]) == ["a", "c"])
        #expect(try await ls(["--locked"]) == ["c"])
        #expect(try await ls(["--unlocked", "--tag", "y"]) == ["a", "b"])
        #expect(try await ls(["--search", "BETA"]) == ["b"])
        #expect(try await ls(["--sort=-completedAt"]) == ["c", "b", "a"])
        let both = try await CLI.run(["ls", "--locked", "--unlocked", "--cache-dir", h.cacheDirectory.path])
        #expect(both.status == 64)

        await h.shutdown()
        let (exit, output) = try await openAPI.validate()
        #expect(exit == 0, "\(output)")
    }
}
