import Foundation

/// What a player consumed of an item through the proxy (the offline SDKs' "record consumption"): when it was last
/// played and which seconds of its media timeline were served, as merged `[start, end]` ranges.
package struct ItemConsumption: Sendable, Hashable, Codable {
    /// The last time one of its segments was served.
    package var lastPlayedAt: Date
    /// Served seconds, sorted, non-overlapping, each `[start, end]` with `start < end`.
    package var served: [[Double]]

    /// A record with nothing served yet.
    package init(lastPlayedAt: Date, served: [[Double]] = []) {
        self.lastPlayedAt = lastPlayedAt
        self.served = served
    }

    /// Seconds served in total (the length of the union of the ranges).
    package var servedSeconds: Double {
        served.reduce(0) { $0 + ($1[1] - $1[0]) }
    }

    /// Adds `start..<end` to the served ranges, merging ranges that overlap or touch (within 10 ms, the rounding
    /// of `EXTINF` durations).
    package mutating func add(start: Double, end: Double) {
        guard end > start, start.isFinite, end.isFinite else { return }
        var lower = start
        var upper = end
        var kept: [[Double]] = []
        for range in served {
            if range[1] + 0.01 < lower || range[0] - 0.01 > upper {
                kept.append(range)
            } else {
                lower = min(lower, range[0])
                upper = max(upper, range[1])
            }
        }
        kept.append([lower, upper])
        served = kept.sorted { $0[0] < $1[0] }
    }
}
