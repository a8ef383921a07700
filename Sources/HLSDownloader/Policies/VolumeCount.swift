import Foundation

/// Bytes this process fetched from origins that the day's count (`download_volume` in `items.sqlite`) does not
/// have yet: noted on the event loop (no I/O), added to the count between resources. Kept in the downloader's state
/// (``Downloader/withVolume(_:)``), under its lock.
struct VolumeCount {
    private var pending: Int64 = 0
    private var recorded: Int64 = 0
    private var day = ""
    private var lastWrite: ContinuousClock.Instant?

    mutating func add(_ bytes: Int) { pending += Int64(bytes) }

    /// The pending bytes to add to `day`'s count now (taken out), or nil when no write is due: `force`, another day,
    /// or a second since the last write.
    mutating func takeDue(day: String, force: Bool, now: ContinuousClock.Instant) -> Int64? {
        let due = force || self.day != day || lastWrite.map { now - $0 >= .seconds(1) } ?? true
        guard due else { return nil }
        defer { pending = 0 }
        return pending
    }

    /// The day's count as last read, with what is pending.
    var total: Int64 { recorded + pending }

    /// `day`'s count read back (`recorded`, this process's bytes included): the total with what is pending since.
    mutating func written(_ recorded: Int64, day: String, at now: ContinuousClock.Instant) -> Int64 {
        self.day = day
        self.recorded = recorded
        lastWrite = now
        return total
    }

    /// The write of `bytes` for `day` failed: they stay pending for the next time.
    mutating func failed(_ bytes: Int64, day: String) -> Int64 {
        pending += bytes
        return (self.day == day ? recorded : 0) + pending
    }
}

extension Downloader {
    /// Counts origin bytes towards the day's volume (written to `items.sqlite` between resources).
    func addVolume(_ bytes: Int) {
        withVolume { $0.add(bytes) }
    }

    /// The day's count with this process's pending bytes added to it. Writes them when `force` or once a second;
    /// a failed write keeps them for the next time.
    func usedVolume(policies: DownloadPolicies, force: Bool) -> Int64 {
        let day = policies.day(of: policies.clock())
        guard let pending = withVolume({ $0.takeDue(day: day, force: force, now: .now) }) else { return withVolume { $0.total } }
        do {
            // Nothing to add: a read (other processes may have added theirs).
            let recorded = pending > 0 ? try items.addVolume(pending, day: day) : try items.volume(day: day)
            return withVolume { $0.written(recorded, day: day, at: .now) }
        } catch {
            return withVolume { $0.failed(pending, day: day) }
        }
    }
}
