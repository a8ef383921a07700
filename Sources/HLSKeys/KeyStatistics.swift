/// Counts of what the key service did since it started, for `/metrics`.
public struct KeyStatistics: Sendable, Equatable {
    /// Keys fetched from their origin and stored.
    public var fetches: Int64 = 0
    /// Origin fetches of keys that failed (unreachable, wrong status, not 16 bytes).
    public var fetchFailures: Int64 = 0
    /// Requests for a key fetched before and now past its expiry, whether or not the purge has dropped its
    /// bytes yet (each then refetched, or refused with `expired`).
    public var expiries: Int64 = 0

    public init() {}
}
