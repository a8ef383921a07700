import Foundation
import HLSDownloader
import HLSTestSupport
import HLSProxy
import NIOConcurrencyHelpers
import Testing

@testable import HLSAdmin

enum Chromium {
    static let path: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
}

@Suite("Console (/) and GET /api/v1/stats")
struct ConsoleTests {
    @Test("GET / is the console: one page whose inline script and style the CSP allows by hash, nothing from elsewhere")
    func pageIsSelfContained() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-console-page-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let h = try await AdminHarness(root: dir)
        defer { h.shutdownLater() }
        let page = try await h.request(.GET, h.base + "/")
        #expect(page.status == 200)
        #expect(page.headers.first(name: "Content-Type") == "text/html; charset=utf-8")
        let csp = try #require(page.headers.first(name: "Content-Security-Policy"))
        #expect(csp.contains("default-src 'none'"))
        #expect(!csp.contains("unsafe-inline"), "only this page's own script and style, by hash")
        #expect(csp.contains("connect-src 'self'") && csp.contains("media-src 'self'"))
        // The hashes name what the page carries (a changed script without a changed hash would not run).
        let script = try #require(Self.between("<script>", "</script>", in: page.text))
        let style = try #require(Self.between("<style>", "</style>", in: page.text))
        #expect(csp.contains("script-src '\(ConsolePage.hash(script))'"))
        #expect(csp.contains("style-src '\(ConsolePage.hash(style))'"))
        #expect(page.text.components(separatedBy: "<script").count == 2, "one script element")
        #expect(!page.text.contains("src=\"http") && !page.text.contains("href="), "no external scripts, images or style sheets")
        #expect(!script.contains("innerHTML"), "item fields are written as text")
        #expect(script.contains("/events") && script.contains("/stats") && script.contains("sessionStorage"))
        let head = try await h.request(.HEAD, h.base + "/")
        #expect(head.status == 200 && head.body.isEmpty)
        let post = try await h.request(.POST, h.base + "/", json: "{}")
        #expect(post.status == 405 && post.headers.first(name: "Allow") == "GET, HEAD")
        await h.shutdown()
    }

    static func between(_ start: String, _ end: String, in text: String) -> String? {
        guard let open = text.range(of: start), let close = text.range(of: end, range: open.upperBound..<text.endIndex) else { return nil }
        return String(text[open.upperBound..<close.lowerBound])
    }

    @Test("GET /api/v1/stats counts bytes from the cache and from the origin per minute, the disk and the items; openapi.yaml holds")
    func statsEndpoint() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-console-stats-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let h = try await AdminHarness(root: dir)
        defer { h.shutdownLater() }
        let openAPI = OpenAPIRecords()
        let body = (0..<5000).map { UInt8($0 % 251) }
        h.origin.setBody(body, contentType: "video/mp2t", for: "/seg.ts")
        var item = DownloadItem(id: "counted", url: h.originURL("/index.m3u8"), precacheSeconds: 2)
        item.state = .paused
        try h.items.insert(item)

        // Fetched until one answer comes from the cache; each answer is counted as cache or origin by its X-Cache.
        var fromCache: Int64 = 0
        var fromOrigin: Int64 = 0
        _ = try await h.eventually("a cache hit") { () -> Bool? in
            let answer = try await h.request(.GET, h.proxyURL("/seg.ts"))
            #expect(answer.status == 200 && answer.body == body)
            if answer.headers.first(name: "X-Cache") == "HIT" {
                fromCache += 1
                return true
            }
            fromOrigin += 1
            return nil
        }
        let (hits, misses) = (fromCache, fromOrigin)
        let stats = try await h.eventually("the stats to count both answers") { () -> [String: Any]? in
            let answer = try await h.request(.GET, h.api("/stats"))
            let hour = answer.json["lastHour"] as? [String: Any] ?? [:]
            guard hour["requestsFromCache"] as? Int == Int(hits), hour["requestsFromOrigin"] as? Int == Int(misses)
            else { return nil }
            openAPI.add("GET", "/stats", answer)
            return answer.json
        }
        let hour = try #require(stats["lastHour"] as? [String: Any])
        #expect(hour["bytesFromCache"] as? Int == Int(hits) * body.count, "\(stats)")
        #expect(hour["bytesFromOrigin"] as? Int == Int(misses) * body.count, "\(stats)")
        let ratio = try #require(hour["hitRatio"] as? Double)
        #expect(abs(ratio - Double(hits) / Double(hits + misses)) < 0.001)
        let series = try #require(stats["traffic"] as? [[String: Any]])
        #expect(series.count == 60, "one sample per minute of the last hour")
        #expect(series.map { $0["bytesFromCache"] as? Int ?? 0 }.reduce(0, +) == Int(hits) * body.count)
        let starts = series.compactMap { ($0["start"] as? String).flatMap(Self.date) }
        #expect(starts.count == 60 && zip(starts, starts.dropFirst()).allSatisfy { $1.timeIntervalSince($0) == 60 })
        let cache = try #require(stats["cache"] as? [String: Any])
        #expect((cache["bytes"] as? Int ?? 0) >= body.count && cache["maxBytes"] as? Int == 1 << 30)
        #expect((stats["items"] as? [String: Any])?["paused"] as? Int == 1)

        let post = try await h.request(.POST, h.api("/stats"), json: "{}")
        #expect(post.status == 405 && post.headers.first(name: "Allow") == "GET, HEAD")
        let result = try await openAPI.validate()
        #expect(result.status == 0, "\(result.output)")
        await h.shutdown()
    }

    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}

@Suite("Traffic history: per-minute samples of the proxy's totals, with an injected clock")
struct TrafficHistoryTests {
    /// A whole minute (1_800_000_000 s is minute 30_000_000).
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func totals(_ cache: Int64, _ origin: Int64, hits: Int64 = 0, misses: Int64 = 0) -> TrafficTotals {
        TrafficTotals(bytesFromCache: cache, bytesFromOrigin: origin, requestsFromCache: hits, requestsFromOrigin: misses)
    }

    @Test("readings add what changed to the minute they fall in; minutes without traffic are zero; the window is 60 minutes")
    func samplesPerMinute() {
        var history = TrafficHistory(capacity: 60)
        history.record(Self.totals(100, 50, hits: 1, misses: 1), at: Self.t0.addingTimeInterval(10))
        history.record(Self.totals(300, 50, hits: 3, misses: 1), at: Self.t0.addingTimeInterval(59))
        history.record(Self.totals(300, 450, hits: 3, misses: 2), at: Self.t0.addingTimeInterval(130))
        let series = history.series(endingAt: Self.t0.addingTimeInterval(150))
        #expect(series.count == 60)
        #expect(series.last?.start == Self.t0.addingTimeInterval(120))
        #expect(series[57].served == Self.totals(300, 50, hits: 3, misses: 1), "minute 0")
        #expect(series[58].served == TrafficTotals(), "minute 1: nothing served")
        #expect(series[59].served == Self.totals(0, 400, misses: 1), "minute 2")
        #expect(series[57].served.hitRatio == 0.75)
        #expect(series[0].start == Self.t0.addingTimeInterval(120 - 59 * 60))

        // An hour later minute 0 has left the window, and the ring holds at most 60 minutes whatever the history.
        let later = history.series(endingAt: Self.t0.addingTimeInterval(60 * 60))
        #expect(later.first?.start == Self.t0.addingTimeInterval(60))
        #expect(later.allSatisfy { $0.served.bytesFromCache == 0 }, "minute 0 held the only cache bytes")
        #expect(later.contains { $0.served.bytesFromOrigin == 400 })
        var running = Self.totals(300, 450, hits: 3, misses: 2)
        for minute in 3..<500 {
            running.bytesFromOrigin += 1
            history.record(running, at: Self.t0.addingTimeInterval(TimeInterval(minute * 60)))
        }
        #expect(history.storedMinutes == 60)
        #expect(history.series(endingAt: Self.t0.addingTimeInterval(499 * 60)).allSatisfy { $0.served.bytesFromOrigin == 1 })
    }

    @Test("the clock stepping back keeps the samples in order; totals that fall start a new baseline")
    func clockAndBaseline() {
        var history = TrafficHistory(capacity: 60)
        history.record(Self.totals(10, 0), at: Self.t0.addingTimeInterval(5 * 60))
        history.record(Self.totals(30, 0), at: Self.t0.addingTimeInterval(3 * 60))
        var series = history.series(endingAt: Self.t0.addingTimeInterval(5 * 60))
        #expect(series.last?.served.bytesFromCache == 30, "the reading from before goes to the newest minute")
        #expect(series.dropLast().allSatisfy { $0.served == TrafficTotals() })
        history.record(Self.totals(5, 0), at: Self.t0.addingTimeInterval(6 * 60))
        history.record(Self.totals(8, 0), at: Self.t0.addingTimeInterval(6 * 60 + 1))
        series = history.series(endingAt: Self.t0.addingTimeInterval(6 * 60))
        #expect(series.last?.served.bytesFromCache == 3, "counted from the new baseline")
        // Asked for a window ending before the newest sample (the wall clock stepped back): shown in its last minute.
        series = history.series(endingAt: Self.t0.addingTimeInterval(4 * 60))
        #expect(series.last?.served.bytesFromCache == 33)
    }

    @Test("sample() reads the attached totals at the injected clock's time")
    func attachedSource() {
        let clock = NIOLockedValueBox(Self.t0)
        let totals = NIOLockedValueBox(TrafficTotals())
        var history = TrafficHistory(capacity: 10, now: { clock.withLockedValue { $0 } })
        history.sample()
        #expect(history.storedMinutes == 0, "no source yet")
        history.attach { totals.withLockedValue { $0 } }
        totals.withLockedValue { $0 = Self.totals(1000, 0, hits: 2) }
        history.sample()
        clock.withLockedValue { $0 = Self.t0.addingTimeInterval(125) }
        totals.withLockedValue { $0 = Self.totals(1000, 700, hits: 2, misses: 1) }
        history.sample()
        let series = history.series()
        #expect(series.count == 10)
        #expect(series.last?.served == Self.totals(0, 700, misses: 1))
        #expect(series[7].served == Self.totals(1000, 0, hits: 2))
    }
}
