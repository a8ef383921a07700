import NIOConcurrencyHelpers

/// The slices being fetched from the origin now, by slice key: a request that needs a slice another request is
/// fetching waits for that slice's commit and then reads it from disk, instead of asking the origin again (DESIGN.md
/// §6: concurrent misses share one origin request). A waiter waits for at most one slice (1 MiB by default), as with
/// nginx's `slice` and `proxy_cache_lock`.
final class SliceFlights: Sendable {
    private let flights = NIOLockedValueBox<[String: [@Sendable (Bool) -> Void]]>([:])

    /// Claims slice `key` for a run of the caller's; false when another run has it.
    func claim(_ key: String) -> Bool {
        flights.withLockedValue { flights in
            guard flights[key] == nil else { return false }
            flights[key] = []
            return true
        }
    }

    /// Calls `done` (on the releasing thread) once the run fetching slice `key` stored it (true) or gave it up
    /// (false); false when no run has it (claim it).
    func wait(for key: String, _ done: @escaping @Sendable (Bool) -> Void) -> Bool {
        flights.withLockedValue { flights in
            guard flights[key] != nil else { return false }
            flights[key]?.append(done)
            return true
        }
    }

    /// The run that claimed slice `key` stored it, or gave it up: its waiters go on.
    func release(_ key: String, stored: Bool) {
        let waiters = flights.withLockedValue { $0.removeValue(forKey: key) } ?? []
        for waiter in waiters { waiter(stored) }
    }

    /// Requests waiting for a slice another one is fetching (tests, diagnostics).
    var waiting: Int { flights.withLockedValue { $0.values.reduce(0) { $0 + $1.count } } }
    /// Slices being fetched.
    var inFlight: Int { flights.withLockedValue { $0.count } }
}
