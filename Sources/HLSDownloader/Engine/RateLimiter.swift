import Synchronization

/// A token bucket shared by every download of a process (`--rate`): callers wait for their bytes in arrival
/// order, so concurrent resources (and items) share the bandwidth fairly, chunk by chunk.
package actor RateLimiter {
    /// Bytes per second (``setRate(_:)`` changes it).
    package nonisolated var bytesPerSecond: Int64 { rate.load(ordering: .relaxed) }
    /// One value on its own, read outside the actor: an atomic, no lock.
    private nonisolated let rate: Atomic<Int64>
    private var burst: Double { max(16 * 1024, Double(bytesPerSecond) / 4) }
    private var available: Double
    private var last: ContinuousClock.Instant
    /// A wider bucket the bytes must pass too (an item's own cap inside the process's).
    private let then: RateLimiter?

    /// A bucket refilled at `bytesPerSecond`, holding at most a quarter second of bytes; bytes it lets through
    /// then wait for `then`, when given.
    package init(bytesPerSecond: Int64, then: RateLimiter? = nil) {
        precondition(bytesPerSecond > 0)
        self.then = then
        self.rate = Atomic(bytesPerSecond)
        available = max(16 * 1024, Double(bytesPerSecond) / 4)
        last = .now
    }

    /// The rate from now on; `nil` lifts the cap (callers already waiting still wait out their debt).
    package func setRate(_ bytesPerSecond: Int64?) {
        available = min(available, burst)
        rate.store(max(1, bytesPerSecond ?? Self.unlimited), ordering: .relaxed)
    }

    /// The rate of a lifted cap: a terabyte a second.
    private static let unlimited: Int64 = 1 << 40

    /// Waits until `bytes` may be passed on.
    package func acquire(_ bytes: Int) async throws {
        let now = ContinuousClock.now
        available = min(burst, available + Double(bytesPerSecond) * Self.seconds(now - last))
        last = now
        available -= Double(bytes)
        guard available < 0 else {
            try await then?.acquire(bytes)
            return
        }
        // In debt: this caller goes when the debt is repaid; the debt itself orders later callers behind it.
        do {
            try await Task.sleep(until: now + .seconds(-available / Double(bytesPerSecond)), clock: .continuous)
        } catch {
            // Cancelled (a pause): these bytes are not passed on, so they do not count against the next callers.
            available += Double(bytes)
            throw error
        }
        try await then?.acquire(bytes)
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (s, attos) = duration.components
        return Double(s) + Double(attos) / 1e18
    }
}
