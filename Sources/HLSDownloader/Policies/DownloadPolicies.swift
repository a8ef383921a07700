import Foundation

/// What holds downloads back (issue 27; PCD's `fileSizeMax`, daily limit and permitted hours): the server-wide
/// defaults of the `downloads.*` settings. An item's own `maxBytes`, `window` and `rateLimit` take the place of
/// the defaults for that item; its own `dailyBytes` limits what it fetches per day, within the server-wide limit.
///
/// An item held back by the daily limit or the window waits in `idle` with the policy as its reason
/// (`dailyLimit`, `outsideWindow`) and its next attempt when the limit resets or the window opens; an item larger
/// than its maximum size fails `tooLarge`.
package struct DownloadPolicies: Sendable {
    /// An item whose estimate, or whose download so far, is larger fails `tooLarge`; `nil`: no limit.
    package var maxItemBytes: Int64?
    /// Bytes all downloads (every process on the cache directory) may fetch from origins per day; `nil`: no limit.
    /// The day is the calendar day in ``timeZone``.
    package var dailyBytes: Int64?
    /// When background downloads may run; `nil`: always.
    package var window: DownloadWindow?
    /// The bandwidth cap of each item without its own (`rate`), bytes per second; `nil`: none.
    package var itemBytesPerSecond: Int64?
    /// Whether this process's downloads keep to the window: `serve`'s background downloads do; a foreground
    /// `hlscache fetch` (someone asked for it now) does not. The size and daily limits apply to both.
    package var enforcesWindow = true
    /// The time zone of the window and of the daily limit's day.
    package var timeZone: TimeZone = .current
    /// The time policies are judged at (injected by tests).
    package var clock: @Sendable () -> Date = { Date() }

    /// No limits.
    package init() {}

    /// The day `date` falls in, as the daily counter names it (`2026-11-26`).
    package func day(of date: Date) -> String {
        let parts = DownloadWindow.calendar(timeZone).dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }

    /// The next midnight after `date`: when the daily counter starts again.
    package func nextDay(after date: Date) -> Date {
        let calendar = DownloadWindow.calendar(timeZone)
        let start = calendar.startOfDay(for: date)
        return calendar.date(byAdding: .day, value: 1, to: start) ?? start.addingTimeInterval(86400)
    }
}
