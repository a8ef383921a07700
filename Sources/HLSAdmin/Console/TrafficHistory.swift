import Foundation
import HLSProxy

/// The last hour of the proxy's traffic in memory, one sample per minute: what the proxy served from the cache
/// and from the origin during that minute (`GET /api/v1/stats`, the console's plot).
///
/// The admin loop calls ``sample()`` about once a second; each call reads the proxy's running totals
/// (``ProxyMetrics/traffic``) and adds what changed since the previous reading to the sample of the current minute.
/// At most ``capacity`` samples are kept (a minute-long ring), so memory stays the same however long the server
/// runs. The clock is injected: tests give the times. A value: the admin API keeps it under its own lock.
struct TrafficHistory: Sendable {
    /// One minute: what was served from its start (`minute`, in minutes since 1970) to its end.
    struct Sample: Sendable, Equatable {
        var minute: Int64
        var served: TrafficTotals

        var start: Date { Date(timeIntervalSince1970: TimeInterval(minute * 60)) }
    }

    private var source: (@Sendable () -> TrafficTotals)?
    /// The totals at the previous reading.
    private var last = TrafficTotals()
    /// Oldest first, at most `capacity`, minutes increasing (with gaps where nothing was served).
    private var samples: [Sample] = []

    /// Minutes kept (60: the last hour).
    let capacity: Int
    private let now: @Sendable () -> Date

    init(capacity: Int = 60, now: @escaping @Sendable () -> Date = { Date() }) {
        precondition(capacity > 0)
        self.capacity = capacity
        self.now = now
    }

    /// Where the totals are read from (the proxy's metrics, once the server exists).
    mutating func attach(_ source: @escaping @Sendable () -> TrafficTotals) {
        self.source = source
    }

    /// Reads the attached source now (nothing without one).
    mutating func sample() {
        guard let source else { return }
        record(source(), at: now())
    }

    /// Adds what `totals` counts beyond the previous reading to the minute of `date`. A reading from before the
    /// newest minute (the wall clock stepped back) goes to the newest minute, so the samples stay in order; totals
    /// smaller than before (another source) start a new baseline.
    mutating func record(_ totals: TrafficTotals, at date: Date) {
        let minute = Self.minute(of: date)
        let last = self.last
        self.last = totals
        let delta = TrafficTotals(
            bytesFromCache: totals.bytesFromCache - last.bytesFromCache, bytesFromOrigin: totals.bytesFromOrigin - last.bytesFromOrigin,
            requestsFromCache: totals.requestsFromCache - last.requestsFromCache,
            requestsFromOrigin: totals.requestsFromOrigin - last.requestsFromOrigin)
        guard delta.bytesFromCache >= 0, delta.bytesFromOrigin >= 0, delta.requestsFromCache >= 0, delta.requestsFromOrigin >= 0 else {
            return
        }
        guard delta != TrafficTotals() else { return }
        if let newest = samples.last, newest.minute >= minute {
            samples[samples.count - 1].served.add(delta)
        } else {
            samples.append(Sample(minute: minute, served: delta))
        }
        // Minutes older than the window are dropped (one at a time: the array is at most capacity + 1 long).
        let oldest = samples[samples.count - 1].minute - Int64(capacity) + 1
        samples.removeAll { $0.minute < oldest }
    }

    /// The `capacity` minutes ending with the current one (read from the clock), oldest first, one sample per
    /// minute (zero where nothing was served).
    func series() -> [Sample] {
        series(endingAt: now())
    }

    func series(endingAt date: Date) -> [Sample] {
        let newest = Self.minute(of: date)
        let oldest = newest - Int64(capacity) + 1
        let stored = samples
        var byMinute: [Int64: TrafficTotals] = [:]
        for sample in stored where sample.minute >= oldest { byMinute[sample.minute, default: TrafficTotals()].add(sample.served) }
        // A sample stamped after `date` (the clock stepped back) is shown in the newest minute rather than lost.
        for sample in stored where sample.minute > newest { byMinute[newest, default: TrafficTotals()].add(sample.served) }
        return (oldest...newest).map { Sample(minute: $0, served: byMinute[$0] ?? TrafficTotals()) }
    }

    /// Minutes held (at most ``capacity``).
    var storedMinutes: Int { samples.count }

    static func minute(of date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 / 60).rounded(.down))
    }
}

extension TrafficTotals {
    mutating func add(_ other: TrafficTotals) {
        bytesFromCache += other.bytesFromCache
        bytesFromOrigin += other.bytesFromOrigin
        requestsFromCache += other.requestsFromCache
        requestsFromOrigin += other.requestsFromOrigin
    }

    /// Requests answered from the cache among all, rounded to 3 places; 0 without requests.
    var hitRatio: Double {
        let all = requestsFromCache + requestsFromOrigin
        return all > 0 ? (Double(requestsFromCache) / Double(all) * 1000).rounded() / 1000 : 0
    }
}
