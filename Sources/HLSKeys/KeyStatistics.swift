/// Counts of what the key service did since it started, for `/metrics`.
package struct KeyStatistics: Sendable, Equatable {
    /// Keys fetched from their origin and stored.
    package var fetches: Int64 = 0
    /// Origin fetches of keys that failed (unreachable, wrong status, not 16 bytes).
    package var fetchFailures: Int64 = 0
    /// Requests for a key fetched before and now past its expiry, whether or not the purge has dropped its
    /// bytes yet (each then refetched, or refused with `expired`).
    package var expiries: Int64 = 0

    package init() {}
}
