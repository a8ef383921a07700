/// The downloads in flight by fetch key: what makes concurrent misses share one. A value type (keep it under a lock),
/// generic so its rules are unit-tested with plain objects.
struct FetchTable<Fetch: AnyObject> {
    private var fetches: [FetchKey: Fetch] = [:]
    /// Downloads removed so far: a request notes it before looking in the store, and a download that ended since
    /// (committing what it stored, then leaving this table) can be told from one that was never there.
    private(set) var removals: UInt64 = 0

    /// The download in flight under `key`, or a new one made by `make` and registered (`started`: start it).
    mutating func join(_ key: FetchKey, make: () -> Fetch) -> FetchJoin<Fetch> {
        if let existing = fetches[key] { return .joined(existing) }
        let fetch = make()
        fetches[key] = fetch
        return .started(fetch)
    }

    /// As ``join(_:make:)``, for a request that looked in the store after noting ``removals`` (`seen`): nil when
    /// nothing is in flight under `key` but a download was removed since — maybe this key's, which stores its object
    /// before it leaves — so the store is asked again before a second download of the same object starts. (A miss's
    /// store lookup can read the index on disk, and take long enough on a loaded machine for the download it missed
    /// to end meanwhile.)
    mutating func join(_ key: FetchKey, unlessRemovedSince seen: UInt64, make: () -> Fetch) -> FetchJoin<Fetch>? {
        if let existing = fetches[key] { return .joined(existing) }
        guard removals == seen else { return nil }
        return join(key, make: make)
    }

    func existing(_ key: FetchKey) -> Fetch? { fetches[key] }

    /// Removes `fetch` (when it ended or failed). A download that ended after another replaced it under its key leaves
    /// the newer one in place: removal is by identity.
    mutating func remove(_ fetch: Fetch) {
        for (key, value) in fetches where value === fetch {
            fetches[key] = nil
            removals &+= 1
        }
    }

    var count: Int { fetches.count }
}

extension FetchTable: Sendable where Fetch: Sendable {}
