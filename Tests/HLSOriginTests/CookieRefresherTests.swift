import HLSCacheCore
import HLSOrigin
import NIOConcurrencyHelpers
import Testing

/// The one cookie refresher of the proxy and the downloader (issue 29): which page a refused URL gets its cookies
/// from, and one fetch per page however many refused requests wait on it.
@Suite struct CookieRefresherTests {
    @Test func aLearntPageComesBeforeTheSource() async throws {
        let refresher = CookieRefresher()
        let asked = NIOLockedValueBox<[String]>([])
        let fallback = try OriginURL("https://cdn.example/items/top.m3u8")
        refresher.setPageSource { url in
            asked.withLockedValue { $0.append(url.path) }
            return fallback
        }
        let segment = try OriginURL("https://cdn.example/v/seg1.ts")
        #expect(await refresher.page(for: segment) == fallback)
        #expect(asked.withLockedValue { $0 } == ["/v/seg1.ts"])
        let master = try OriginURL("https://cdn.example/live/master.m3u8")
        refresher.learn(page: master)
        #expect(await refresher.page(for: segment) == master)
        // Another origin (scheme, host or port) has a page of its own.
        #expect(await refresher.page(for: try OriginURL("https://cdn.example:8443/v/seg1.ts")) == fallback)
        #expect(asked.withLockedValue { $0.count } == 2, "the source was asked only when no page was learnt")
    }

    @Test func refreshesOfOnePageShareOneFetch() async throws {
        let refresher = CookieRefresher()
        let page = try OriginURL("https://cdn.example/master.m3u8")
        let fetches = NIOLockedValueBox(0)
        let (gate, open) = AsyncStream<Void>.makeStream()
        // Ten refused requests at once: one fetch, which all of them wait for.
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    await refresher.refresh(page, within: .seconds(3600)) {
                        fetches.withLockedValue { $0 += 1 }
                        for await _ in gate { break }
                    }
                }
            }
            // The fetch is held until the first refresh has started it.
            while fetches.withLockedValue({ $0 }) == 0 { await Task.yield() }
            open.yield()
            open.finish()
        }
        #expect(fetches.withLockedValue { $0 } == 1)
        // Within the interval: nothing again; another page, or past the interval: fetched.
        await refresher.refresh(page, within: .seconds(3600)) { fetches.withLockedValue { $0 += 1 } }
        #expect(fetches.withLockedValue { $0 } == 1)
        await refresher.refresh(try OriginURL("https://cdn.example/other.m3u8"), within: .seconds(3600)) {
            fetches.withLockedValue { $0 += 1 }
        }
        #expect(fetches.withLockedValue { $0 } == 2)
        await refresher.refresh(page, within: .zero) { fetches.withLockedValue { $0 += 1 } }
        #expect(fetches.withLockedValue { $0 } == 3)
    }
}
