import Foundation
import HLSDownloader
import HLSTestSupport
import Testing

/// The download hours (`downloads.window`): parsing, membership across midnight, the next opening.
@Suite struct DownloadWindowTests {
    private let utc = TimeZone(identifier: "UTC")!
    private func date(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }

    @Test func parsing() {
        #expect(DownloadWindow(parsing: "22:00-06:00")?.description == "22:00-06:00")
        #expect(DownloadWindow(parsing: " 9:05 - 17:30 ")?.description == "09:05-17:30")
        for bad in ["", "22:00", "22-06", "24:00-06:00", "22:60-06:00", "10:00-10:00", "aa:bb-cc:dd", "22:00-06:00-07:00", "+1:00-02:00"] {
            #expect(DownloadWindow(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func membershipAndNextOpening() throws {
        let night = try #require(DownloadWindow(parsing: "22:00-06:00"))
        #expect(night.contains(date("2026-06-01T23:00:00Z"), timeZone: utc))
        #expect(night.contains(date("2026-06-01T05:59:00Z"), timeZone: utc))
        #expect(night.contains(date("2026-06-01T22:00:00Z"), timeZone: utc), "the opening minute is in")
        #expect(!night.contains(date("2026-06-01T06:00:00Z"), timeZone: utc), "the closing minute is out")
        #expect(!night.contains(date("2026-06-01T12:00:00Z"), timeZone: utc))
        #expect(night.nextOpening(after: date("2026-06-01T12:00:00Z"), timeZone: utc) == date("2026-06-01T22:00:00Z"))
        #expect(night.nextOpening(after: date("2026-06-01T23:00:00Z"), timeZone: utc) == date("2026-06-02T22:00:00Z"))
        let day = try #require(DownloadWindow(parsing: "09:00-17:00"))
        #expect(day.contains(date("2026-06-01T09:00:00Z"), timeZone: utc))
        #expect(!day.contains(date("2026-06-01T17:00:00Z"), timeZone: utc))
        // In another zone: 09:00 in Paris (UTC+2 in June) is 07:00 UTC.
        let paris = try #require(TimeZone(identifier: "Europe/Paris"))
        #expect(day.contains(date("2026-06-01T07:30:00Z"), timeZone: paris))
        #expect(day.nextOpening(after: date("2026-06-01T16:00:00Z"), timeZone: paris) == date("2026-06-02T07:00:00Z"))
    }

    @Test func theDailyCounterDay() {
        var policies = DownloadPolicies()
        policies.timeZone = utc
        #expect(policies.day(of: date("2026-06-01T23:59:59Z")) == "2026-06-01")
        #expect(policies.nextDay(after: date("2026-06-01T10:00:00Z")) == date("2026-06-02T00:00:00Z"))
    }
}
