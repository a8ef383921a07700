import Foundation
import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSTestSupport
import Testing

@testable import HLSProxy

/// An item with `through` (issue 28: `fetch --through`, the API's `through`): the downloader asks another hlscache —
/// a fleet's balancer, here one proxy — for every resource at its proxy path and for each key at its
/// `/keys/{id}/…`. That server fetches each from the origin once and keeps it (segments in its cache, keys sealed in
/// its key store); the item is stored where it was created, as usual. (scripts/fleet-check.sh does the same through
/// HAProxy and three nodes.)
@Suite struct ThroughItemTests {
    @Test func anItemWithThroughIsDownloadedThroughAnotherServer() async throws {
        let made = try await KeyServingTests.aes128()
        let balancer = try await ProxyHarness.start(serving: made)
        defer { Task { await balancer.shutdown() } }
        let fetch = try DownloaderHarness(origin: balancer.origin)
        defer { Task { await fetch.shutdown() } }
        var item = DownloadItem(id: "via-balancer", url: fetch.url("/index.m3u8"))
        item.through = balancer.base
        try fetch.items.insert(item)
        let done = try await fetch.downloader.run("via-balancer")
        #expect(done.state == .cached, "\(done.errorCode ?? "") \(done.errorMessage ?? "")")
        #expect(try fetch.items.item("via-balancer")?.through == balancer.base)

        // Every origin request came from the balancer (its origin client's Via), each resource once.
        let requests = balancer.origin.requests
        let token = balancer.originClient.instanceToken
        #expect(!requests.isEmpty)
        for request in requests {
            #expect(request.headers.contains { $0.0.lowercased() == "via" && $0.1.contains(token) }, "\(request.path) did not come through")
        }
        let paths = requests.map(\.path)
        #expect(Set(paths).count == paths.count, "a resource fetched twice: \(paths)")

        let playlist = try String(contentsOf: made.appendingPathComponent("index.m3u8"), encoding: .utf8)
        let segments = playlist.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map { "/" + $0 }
        try #require(segments.count >= 4)
        for segment in segments {
            #expect(balancer.store.lookup(CacheKey(try OriginURL(balancer.originURL(segment)))) != nil, "\(segment) not on the balancer")
            #expect(try fetch.stored(segment) != nil, "\(segment) not stored by the item")
        }
        // Keys: fetched from the balancer's /keys/{id}/…, so both key stores hold them sealed.
        let keys = fetch.keys
        let names = try FileManager.default.contentsOfDirectory(atPath: made.appendingPathComponent("keys").path).filter {
            $0.hasSuffix(".key")
        }
        try #require(!names.isEmpty)
        for name in names {
            let url = try OriginURL(balancer.originURL("/keys/" + name))
            #expect(try balancer.keys.record(balancer.keys.id(for: url))?.isStored == true, "\(name) not in the balancer's key store")
            #expect(try keys.record(keys.id(for: url))?.isStored == true, "\(name) not in the item's key store")
            #expect(requests.filter { $0.path == "/keys/" + name }.count == 1)
        }
    }
}
