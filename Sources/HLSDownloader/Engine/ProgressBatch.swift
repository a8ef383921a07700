import HLSCacheCore
import Synchronization

/// Gathers the resources a run has stored and records them in `items.sqlite` together: at most once per
/// ``DownloaderConfiguration/progressWriteInterval`` (or every ``maxBatch`` resources), and whatever is left when the
/// run ends, however it ends. A resource stored while no write is due is written when the interval has passed, by a
/// deferred write if nothing else comes: the transfers after it may take minutes (a slow origin, a stalled one).
///
/// One write transaction per stored resource (93 for a 60-second, 3-variant stream) was a visible part of a prewarm's
/// CPU (docs/benchmarks.md). Nothing depends on a resource's row being marked at once: a resumed item takes every
/// resource already in the cache as done, whatever its row says; other processes see progress about an interval
/// late at most.
final class ProgressBatch: Sendable {
    private struct Pending {
        var resources: [(key: String, size: Int64)] = []
        var lastWrite = ContinuousClock.now
        /// A deferred write is waiting for the interval to pass.
        var writeScheduled = false
    }

    /// Resources marked in one transaction at most, whatever the interval.
    static let maxBatch = 64

    private let id: String
    private let items: ItemStore
    private let estimator: @Sendable (ResourceTotals) -> Int64
    private let interval: Duration
    private let onProgress: @Sendable (String, ItemProgressCounts) -> Void
    /// The run's speed now (recorded with the progress).
    private let speed: @Sendable () -> Double?
    private let pending = Mutex(Pending())
    /// Held while writing, so the progress reported never goes backwards.
    private let writer = Mutex(())

    init(
        id: String, items: ItemStore, estimator: @escaping @Sendable (ResourceTotals) -> Int64, interval: Duration,
        speed: @escaping @Sendable () -> Double? = { nil }, onProgress: @escaping @Sendable (String, ItemProgressCounts) -> Void
    ) {
        self.speed = speed
        self.id = id
        self.items = items
        self.estimator = estimator
        self.interval = interval
        self.onProgress = onProgress
    }

    /// Notes one stored resource; writes the batch when it is due (unless another task is writing: then a deferred
    /// write follows).
    func add(_ key: CacheKey, size: Int64) throws(DownloadError) {
        let (due, deferBy) = pending.withLock { pending -> (Bool, Duration?) in
            pending.resources.append((key.value, size))
            let elapsed = ContinuousClock.now - pending.lastWrite
            if pending.resources.count >= Self.maxBatch || elapsed >= interval { return (true, nil) }
            if pending.writeScheduled { return (false, nil) }
            pending.writeScheduled = true
            return (false, interval - elapsed)
        }
        if let deferBy { scheduleWrite(after: deferBy) }
        guard due else { return }
        if let written = writer.withLockIfAvailable({ _ in write() }) {
            try written.get()
        } else {
            // Another write is running and may have taken its batch before this resource was added.
            let schedule = pending.withLock { pending in
                defer { pending.writeScheduled = true }
                return !pending.writeScheduled
            }
            if schedule { scheduleWrite(after: interval) }
        }
    }

    /// Writes what is pending once `delay` has passed. A failed write leaves its resources pending for the next
    /// write (a later `add` or the run's final `flush`, which reports the error).
    private func scheduleWrite(after delay: Duration) {
        Task { [self] in
            try? await Task.sleep(for: delay)
            pending.withLock { $0.writeScheduled = false }
            _ = writer.withLock { _ in write() }
        }
    }

    /// Writes everything gathered (waiting for a write in progress).
    func flush() throws(DownloadError) {
        try writer.withLock { _ in write() }.get()
    }

    /// With `writer` held. A result, not a throw: `Mutex`'s closures rethrow untyped errors.
    private func write() -> Result<Void, DownloadError> {
        Result { () throws(DownloadError) in try writeBatch() }
    }

    private func writeBatch() throws(DownloadError) {
        let batch = pending.withLock { pending in
            defer {
                pending.resources = []
                pending.lastWrite = .now
            }
            return pending.resources
        }
        guard !batch.isEmpty else { return }
        let counts: ItemProgressCounts?
        do {
            counts = try items.markDone(id, resources: batch, estimatedTotal: estimator, bytesPerSecond: speed())
        } catch {
            pending.withLock { $0.resources.insert(contentsOf: batch, at: 0) }
            throw error
        }
        // nil: the item was removed meanwhile.
        if let counts { onProgress(id, counts) }
    }
}
