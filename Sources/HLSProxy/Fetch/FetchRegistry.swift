import NIOConcurrencyHelpers

/// In-flight origin downloads, so concurrent misses share one (docs/design.md, "Cache store"). Downloads are
/// started only through ``ResourceService/originFetch(key:url:cacheable:purpose:)``.
final class FetchRegistry: Sendable {
    private let table = NIOLockedValueBox(FetchTable<SharedFetch>())

    /// Only ``ResourceService/originFetch(key:url:cacheable:purpose:)`` joins, which starts what this started.
    func join(_ key: FetchKey, make: () -> SharedFetch) -> FetchJoin<SharedFetch> {
        table.withLockedValue { $0.join(key, make: make) }
    }

    func existing(_ key: FetchKey) -> SharedFetch? {
        table.withLockedValue { $0.existing(key) }
    }

    func remove(_ fetch: SharedFetch) {
        table.withLockedValue { $0.remove(fetch) }
    }

    var count: Int { table.withLockedValue { $0.count } }
}
