import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import NIOConcurrencyHelpers
import Testing

/// The download policies (issue 27): a maximum size per item, a daily volume, the hours downloads may run. Time is an
/// injected clock (``DownloadPolicies/clock``): nothing here waits for a day to pass or a window to open.
@Suite(.serialized) struct DownloadPolicyTests {
    /// A VOD media playlist of `count` segments of `size` bytes each (no BANDWIDTH: no estimate), on an origin of its own.
    private func origin(segments count: Int = 10, size: Int = 10_000, master: Bool = false) async throws -> TestOrigin {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-policy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let origin = TestOrigin(root: root)
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n"
        for index in 0..<count {
            playlist += "#EXTINF:2.0,\nseg\(index).ts\n"
            origin.setBody([UInt8](repeating: UInt8(index), count: size), contentType: "video/mp2t", for: "/seg\(index).ts")
        }
        playlist += "#EXT-X-ENDLIST\n"
        origin.setBody(Array(playlist.utf8), for: "/index.m3u8")
        if master {
            // 800 kbit/s × 20 s: an estimate of 2 MB.
            origin.setBody(Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=800000\nindex.m3u8\n".utf8), for: "/master.m3u8")
        }
        try await origin.start()
        return origin
    }

    private static let utc = TimeZone(identifier: "UTC")!

    private static func date(_ text: String) -> Date {
        ISO8601DateFormatter().date(from: text)!
    }

    /// A clock tests move by hand.
    final class Clock: Sendable {
        private let now: NIOLockedValueBox<Date>
        init(_ start: Date) { now = NIOLockedValueBox(start) }
        func read() -> Date { now.withLockedValue { $0 } }
        func set(_ date: Date) { now.withLockedValue { $0 = date } }
    }

    private func segmentsStored(_ fetch: DownloaderHarness, count: Int) throws -> Int {
        try (0..<count).filter { try fetch.stored("/seg\($0).ts") != nil }.count
    }

    /// A daily limit of 60,000 bytes over ten 10,000-byte segments: the run stops at the first resource boundary past
    /// the limit (6 segments), the item waits in `idle` with `dailyLimit` until midnight, a scheduler leaves it alone
    /// until then, and the next day it continues where it stopped and completes.
    @Test func aDailyLimitStopsAnItemAtTheLimitAndItContinuesTheNextDay() async throws {
        let origin = try await origin()
        let clock = Clock(Self.date("2026-06-01T10:00:00Z"))
        let fetch = try DownloaderHarness(
            origin: origin,
            configure: {
                $0.resourcesPerItem = 1
                $0.policies.dailyBytes = 60_000
                $0.policies.timeZone = Self.utc
                $0.policies.clock = { clock.read() }
            })
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8", id: "capped")
        #expect(item.state == .idle)
        #expect(item.errorCode == "dailyLimit")
        #expect(item.errorMessage?.contains("downloads.dailyLimit") == true, "\(item.errorMessage ?? "")")
        #expect(item.nextAttemptAt == Self.date("2026-06-02T00:00:00Z"), "the counter resets at midnight")
        #expect(try segmentsStored(fetch, count: 10) == 6, "stopped at the first boundary past 60,000 bytes")
        let firstDay = try fetch.items.volume(day: "2026-06-01")
        #expect(firstDay >= 60_000 && firstDay < 70_000 + 1_000, "the day's count: \(firstDay)")
        #expect(fetch.events.contains(.stateChanged(id: "capped", state: .idle, errorCode: "dailyLimit")))
        #expect(try fetch.items.runnable(limit: 10, now: clock.read()).isEmpty, "held until the counter resets")

        // Run again the same day (a `resume`, another process): held at once, nothing fetched.
        let requestsBefore = origin.requests.count
        let again = try await fetch.downloader.run("capped")
        #expect(again.state == .idle && again.errorCode == "dailyLimit")
        #expect(origin.requests.count == requestsBefore, "a held item fetches nothing")

        // Midnight: the counter starts again and the item is due.
        clock.set(Self.date("2026-06-02T00:00:01Z"))
        #expect(try fetch.items.runnable(limit: 10, now: clock.read()).map(\.id) == ["capped"])
        let done = try await fetch.downloader.run("capped")
        #expect(done.state == .cached, "\(done.state) \(done.errorCode ?? "") \(done.errorMessage ?? "")")
        #expect(done.errorCode == nil && done.nextAttemptAt == nil)
        #expect(try segmentsStored(fetch, count: 10) == 10)
        for index in 0..<6 { #expect(origin.requests(matching: "/seg\(index).ts").count == 1, "segment \(index) fetched again") }
        let secondDay = try fetch.items.volume(day: "2026-06-02")
        #expect(secondDay >= 40_000 && secondDay < 50_000, "the second day's count: \(secondDay)")
        await fetch.shutdown()
        await origin.stop()
    }

    /// An item's own daily limit (`fetch --daily-limit`, `dailyLimit`): 30,000 bytes over ten 10,000-byte segments stops
    /// that item at the first boundary past its limit (3 segments), `idle` with `dailyLimit` naming the item's limit,
    /// until midnight; another item the same day, without a limit of its own, is not held back (the count is per item);
    /// the next day it continues where it stopped, with a fresh count of its own.
    @Test func anItemsOwnDailyLimitStopsThatItemAndItContinuesTheNextDay() async throws {
        let origin = try await origin()
        let clock = Clock(Self.date("2026-06-01T10:00:00Z"))
        let fetch = try DownloaderHarness(
            origin: origin,
            configure: {
                $0.resourcesPerItem = 1
                $0.policies.timeZone = Self.utc
                $0.policies.clock = { clock.read() }
            })
        defer { Task { await fetch.shutdown() } }
        var capped = DownloadItem(id: "own-cap", url: fetch.url("/index.m3u8"))
        capped.dailyBytes = 30_000
        try fetch.items.insert(capped)
        let held = try await fetch.downloader.run("own-cap")
        #expect(held.state == .idle)
        #expect(held.errorCode == "dailyLimit")
        #expect(held.errorMessage?.contains("the item's daily download volume") == true, "\(held.errorMessage ?? "")")
        #expect(held.nextAttemptAt == Self.date("2026-06-02T00:00:00Z"), "the item's count resets at midnight")
        #expect(try segmentsStored(fetch, count: 10) == 3, "stopped at the first boundary past 30,000 bytes")
        let counted = try fetch.items.itemVolume("own-cap", day: "2026-06-01")
        #expect(counted >= 30_000 && counted < 40_000 + 1_000, "the item's count: \(counted)")
        #expect(fetch.events.contains(.stateChanged(id: "own-cap", state: .idle, errorCode: "dailyLimit")))
        #expect(try fetch.items.runnable(limit: 10, now: clock.read()).isEmpty, "held until its counter resets")
        let requestsBefore = origin.requests.count
        #expect(try await fetch.downloader.run("own-cap").errorCode == "dailyLimit", "held again the same day")
        #expect(origin.requests.count == requestsBefore, "a held item fetches nothing")

        // The limit is the item's: another item (no limit of its own, no server-wide one) downloads all of the same
        // stream the same day, and has a count of its own.
        let other = try await fetch.fetch("/index.m3u8", id: "free")
        #expect(other.state == .cached, "\(other.state) \(other.errorCode ?? "")")
        let free = try fetch.items.itemVolume("free", day: "2026-06-01")
        #expect(free >= 70_000 && free < 80_000, "every item is counted (the 7 segments it fetched): \(free)")
        #expect(try fetch.items.itemVolume("own-cap", day: "2026-06-01") == counted, "another item's bytes are not this item's")

        // Midnight: its own counter starts again; it continues where it stopped (the rest is cached now by "free").
        clock.set(Self.date("2026-06-02T00:00:01Z"))
        #expect(try fetch.items.runnable(limit: 10, now: clock.read()).map(\.id) == ["own-cap"])
        let done = try await fetch.downloader.run("own-cap")
        #expect(done.state == .cached, "\(done.state) \(done.errorCode ?? "") \(done.errorMessage ?? "")")
        #expect(done.errorCode == nil && done.nextAttemptAt == nil)
        await fetch.shutdown()

        // The same with the rest still on the origin: a new cache, two days, the second day's count the item's own.
        let second = try DownloaderHarness(
            origin: origin,
            configure: {
                $0.resourcesPerItem = 1
                $0.policies.timeZone = Self.utc
                $0.policies.clock = { clock.read() }
            })
        defer { Task { await second.shutdown() } }
        clock.set(Self.date("2026-06-03T10:00:00Z"))
        var again = DownloadItem(id: "two-days", url: second.url("/index.m3u8"))
        again.dailyBytes = 60_000
        try second.items.insert(again)
        #expect(try await second.downloader.run("two-days").errorCode == "dailyLimit")
        #expect(try segmentsStored(second, count: 10) == 6)
        clock.set(Self.date("2026-06-04T08:00:00Z"))
        #expect(try await second.downloader.run("two-days").state == .cached)
        #expect(try segmentsStored(second, count: 10) == 10)
        let secondDay = try second.items.itemVolume("two-days", day: "2026-06-04")
        #expect(secondDay >= 40_000 && secondDay < 50_000, "the second day's count: \(secondDay)")
        // Removed without its metadata, its counts go with it.
        try second.downloader.remove("two-days", keepMetadata: false)
        #expect(try second.items.itemVolume("two-days", day: "2026-06-04") == 0)
        await second.shutdown()
        await origin.stop()
    }

    /// Outside the download hours a new item goes from `queued` straight to `idle` (`outsideWindow`), waiting until
    /// the window opens; it fetches nothing. Once the window is open it downloads. An item's own window takes the
    /// place of the server's.
    @Test func aWindowClosedNowHoldsANewItemInIdle() async throws {
        let origin = try await origin()
        let clock = Clock(Self.date("2026-06-01T12:00:00Z"))
        let fetch = try DownloaderHarness(
            origin: origin,
            configure: {
                $0.policies.window = DownloadWindow(parsing: "22:00-06:00")
                $0.policies.timeZone = Self.utc
                $0.policies.clock = { clock.read() }
            })
        defer { Task { await fetch.shutdown() } }
        let held = try await fetch.fetch("/index.m3u8", id: "night")
        #expect(held.state == .idle)
        #expect(held.errorCode == "outsideWindow")
        #expect(held.nextAttemptAt == Self.date("2026-06-01T22:00:00Z"), "waits for the window to open")
        #expect(held.errorMessage?.contains("22:00-06:00") == true)
        #expect(origin.requests.isEmpty, "nothing fetched outside the window")
        let states = fetch.events.compactMap { event -> ItemState? in
            if case .stateChanged("night", let state, _) = event { return state }
            return nil
        }
        #expect(states == [.idle], "queued → idle, never downloading: \(states)")
        #expect(try fetch.items.runnable(limit: 10, now: clock.read()).isEmpty)

        // Its own window, open now, takes the place of the server's.
        var own = DownloadItem(id: "own", url: fetch.url("/index.m3u8"))
        own.downloadWindow = DownloadWindow(parsing: "11:00-13:00")
        try fetch.items.insert(own)
        #expect(try await fetch.downloader.run("own").state == .cached)

        // 22:30: the server's window is open.
        clock.set(Self.date("2026-06-01T22:30:00Z"))
        #expect(try fetch.items.runnable(limit: 10, now: clock.read()).map(\.id) == ["night"])
        #expect(try await fetch.downloader.run("night").state == .cached)
        await fetch.shutdown()

        // A foreground `hlscache fetch` (enforcesWindow false) is not held by the window.
        let foreground = try DownloaderHarness(
            origin: origin,
            configure: {
                $0.policies.window = DownloadWindow(parsing: "22:00-06:00")
                $0.policies.timeZone = Self.utc
                $0.policies.enforcesWindow = false
                $0.policies.clock = { Self.date("2026-06-01T12:00:00Z") }
            })
        defer { Task { await foreground.shutdown() } }
        #expect(try await foreground.fetch("/index.m3u8").state == .cached)
        await foreground.shutdown()
        await origin.stop()
    }

    /// A maximum size: an estimate above it fails the item `tooLarge` before any segment is fetched; without an
    /// estimate, the download fails `tooLarge` once it has fetched more than the maximum.
    @Test func aMaximumSizeStopsAnItemWithItsCode() async throws {
        let origin = try await origin(master: true)
        let fetch = try DownloaderHarness(origin: origin, configure: { $0.resourcesPerItem = 1 })
        defer { Task { await fetch.shutdown() } }
        var big = DownloadItem(id: "big", url: fetch.url("/master.m3u8"))
        big.maxBytes = 1_000_000
        try fetch.items.insert(big)
        let refused = try await fetch.downloader.run("big")
        #expect(refused.state == .failed)
        #expect(refused.errorCode == "tooLarge")
        #expect(refused.errorMessage?.contains("estimate") == true, "\(refused.errorMessage ?? "")")
        #expect(origin.requests(matching: ".ts").isEmpty, "no segment fetched")
        await fetch.shutdown()

        // No estimate (a media playlist without BANDWIDTH): the server's maximum stops the download itself.
        let limited = try DownloaderHarness(
            origin: origin,
            configure: {
                $0.resourcesPerItem = 1
                $0.policies.maxItemBytes = 35_000
            })
        defer { Task { await limited.shutdown() } }
        let stopped = try await limited.fetch("/index.m3u8", id: "long")
        #expect(stopped.state == .failed)
        #expect(stopped.errorCode == "tooLarge")
        #expect(stopped.errorMessage?.contains("downloads.maxItemSize") == true, "\(stopped.errorMessage ?? "")")
        let stored = try segmentsStored(limited, count: 10)
        #expect(stored >= 3 && stored <= 4, "stopped past 35,000 bytes: \(stored) segments")
        #expect(limited.events.contains(.stateChanged(id: "long", state: .failed, errorCode: "tooLarge")))
        // The dry run tells the same before anything is recorded.
        var probe = DownloadItem(id: "probe", url: limited.url("/master.m3u8"))
        probe.maxBytes = 1_000_000
        let (plan, refusal) = try await limited.downloader.dryRun(probe)
        #expect(plan.estimatedBytes == 2_000_000)
        #expect(refusal == .tooLarge)
        await limited.shutdown()
        await origin.stop()
    }
}
