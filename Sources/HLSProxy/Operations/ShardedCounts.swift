import Synchronization

/// Running totals counted by many threads without sharing a cache line: each event loop adds into a shard of its own
/// (its index among the server's loops, ``ProxyServer``), and a total is the sum over the shards, read when wanted.
///
/// A counter that every loop adds to bounces its cache line between the cores on each add: the request counters were
/// ~2.5 % of a replayed playlist hit's CPU at 8 connections on two cores (docs/benchmarks.md, issue 39). A shard's
/// counts are contiguous and start on a cache line of their own. More loops than shards share them by remainder:
/// the adds are atomic, so a shared shard is slower, never wrong.
package final class ShardedCounts: @unchecked Sendable {
    /// Shards made; loop `i` adds into shard `i % shards`.
    package static let shards = 16
    /// Counts per shard, rounded up to whole cache lines (8 × 8 bytes).
    private let stride: Int
    let count: Int
    private let storage: UnsafeMutablePointer<Atomic<Int64>>

    init(count: Int) {
        self.count = count
        stride = (count + 7) / 8 * 8
        let total = stride * Self.shards
        // Aligned to a cache line, so that shard boundaries are line boundaries.
        let raw = UnsafeMutableRawPointer.allocate(byteCount: total * MemoryLayout<Atomic<Int64>>.stride, alignment: 64)
        storage = raw.bindMemory(to: Atomic<Int64>.self, capacity: total)
        for index in 0..<total { (storage + index).initialize(to: Atomic(0)) }
    }

    deinit {
        storage.deinitialize(count: stride * Self.shards)
        UnsafeMutableRawPointer(storage).deallocate()
    }

    /// Adds `value` to count `index`, in the shard of loop `shard`.
    func add(_ index: Int, _ value: Int64, shard: Int) {
        precondition(index >= 0 && index < count, "count \(index) of \(count)")
        let base = (shard & Int.max) % Self.shards * stride
        storage[base + index].add(value, ordering: .relaxed)
    }

    /// Count `index` summed over the shards.
    func total(_ index: Int) -> Int64 {
        precondition(index >= 0 && index < count, "count \(index) of \(count)")
        var sum: Int64 = 0
        for shard in 0..<Self.shards { sum &+= storage[shard * stride + index].load(ordering: .relaxed) }
        return sum
    }
}
