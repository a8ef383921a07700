/// Counts of what the key service did since it started, for `/metrics`.
public struct KeyStatistics: Sendable, Equatable {
    /// Keys fetched from their origin and stored.
    public var fetches: Int64 = 0
    /// Origin fetches of keys that failed (unreachable, wrong status, not 16 bytes).
    public var fetchFailures: Int64 = 0
    /// Stored keys found past their expiry when asked for (then refetched, or refused with `expired`).
    public var expiries: Int64 = 0

    public init() {}
}
