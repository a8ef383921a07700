/// The downloads in flight by fetch key: what makes concurrent misses share one. A value type (keep it under a lock),
/// generic so its rules are unit-tested with plain objects.
struct FetchTable<Fetch: AnyObject> {
    private var fetches: [FetchKey: Fetch] = [:]

    /// The download in flight under `key`, or a new one made by `make` and registered (`started`: start it).
    mutating func join(_ key: FetchKey, make: () -> Fetch) -> FetchJoin<Fetch> {
        if let existing = fetches[key] { return .joined(existing) }
        let fetch = make()
        fetches[key] = fetch
        return .started(fetch)
    }

    func existing(_ key: FetchKey) -> Fetch? { fetches[key] }

    /// Removes `fetch` (when it ended or failed). A download that ended after another replaced it under its key leaves
    /// the newer one in place: removal is by identity.
    mutating func remove(_ fetch: Fetch) {
        for (key, value) in fetches where value === fetch { fetches[key] = nil }
    }

    var count: Int { fetches.count }
}

extension FetchTable: Sendable where Fetch: Sendable {}
