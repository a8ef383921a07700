import NIOConcurrencyHelpers

/// In-flight origin downloads, so concurrent misses share one (docs/design.md, "Cache store"). Downloads are
/// started only through ``ResourceService/originFetch(key:url:cacheable:purpose:)``. Also the read-aheads this node
/// asked a fleet's balancer for (``ReadAheadThrough``), at most one per segment: the same table, under one lock.
final class FetchRegistry: Sendable {
    private struct Tables {
        var fetches = FetchTable<SharedFetch>()
        /// Keys of the segments requested through the balancer and not answered yet.
        var throughBalancer: Set<String> = []
    }
    private let tables = NIOLockedValueBox(Tables())

    /// Only ``ResourceService/originFetch(key:url:cacheable:purpose:)`` joins, which starts what this started.
    func join(_ key: FetchKey, make: () -> SharedFetch) -> FetchJoin<SharedFetch> {
        tables.withLockedValue { $0.fetches.join(key, make: make) }
    }

    /// As ``FetchTable/join(_:unlessRemovedSince:make:)``: nil when a download ended since `seen` (``removals``) and
    /// nothing is in flight under `key`: look in the store again.
    func join(_ key: FetchKey, unlessRemovedSince seen: UInt64, make: () -> SharedFetch) -> FetchJoin<SharedFetch>? {
        tables.withLockedValue { $0.fetches.join(key, unlessRemovedSince: seen, make: make) }
    }

    /// Downloads that have ended so far (``FetchTable/removals``): noted before a store lookup that may lead to a
    /// download.
    var removals: UInt64 { tables.withLockedValue { $0.fetches.removals } }

    func existing(_ key: FetchKey) -> SharedFetch? {
        tables.withLockedValue { $0.fetches.existing(key) }
    }

    func remove(_ fetch: SharedFetch) {
        tables.withLockedValue { $0.fetches.remove(fetch) }
    }

    var count: Int { tables.withLockedValue { $0.fetches.count } }

    /// Records a read-ahead of segment `key` through the balancer; false when one is in flight already.
    func beginThroughBalancer(_ key: String) -> Bool {
        tables.withLockedValue { $0.throughBalancer.insert(key).inserted }
    }

    /// The read-ahead of `key` through the balancer ended.
    func endThroughBalancer(_ key: String) {
        tables.withLockedValue { _ = $0.throughBalancer.remove(key) }
    }
}
