/// What the proxy served since it started, by where the bytes came from: the cache (disk, or a live playlist
/// fresh in memory) or the origin (a miss, a client joining a download in flight, a relayed range).
package struct TrafficTotals: Sendable, Equatable {
    /// Body bytes of proxied resources sent from the cache.
    package var bytesFromCache: Int64
    /// Body bytes of proxied resources relayed from the origin.
    package var bytesFromOrigin: Int64
    /// Proxied resources answered from the cache (`X-Cache: HIT`, live playlists from memory).
    package var requestsFromCache: Int64
    /// Proxied resources answered from the origin.
    package var requestsFromOrigin: Int64

    package init(bytesFromCache: Int64 = 0, bytesFromOrigin: Int64 = 0, requestsFromCache: Int64 = 0, requestsFromOrigin: Int64 = 0) {
        self.bytesFromCache = bytesFromCache
        self.bytesFromOrigin = bytesFromOrigin
        self.requestsFromCache = requestsFromCache
        self.requestsFromOrigin = requestsFromOrigin
    }
}
