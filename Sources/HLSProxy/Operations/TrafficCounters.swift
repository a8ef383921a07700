import Synchronization

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

/// ``TrafficTotals`` counted beside `hlscache_served_bytes_total` and `hlscache_cache_requests_total` (whose values
/// the Prometheus library does not let the process read back): four relaxed atomic adds at most per response.
final class TrafficCounters: Sendable {
    private let cacheBytes = Atomic<Int64>(0)
    private let originBytes = Atomic<Int64>(0)
    private let cacheRequests = Atomic<Int64>(0)
    private let originRequests = Atomic<Int64>(0)

    /// One answered proxied resource; `bytes` counts only when it was content (a status below 400).
    func record(_ source: ByteSource, bytes: Int64) {
        switch source {
        case .disk, .memory:
            cacheRequests.add(1, ordering: .relaxed)
            if bytes > 0 { cacheBytes.add(bytes, ordering: .relaxed) }
        case .origin:
            originRequests.add(1, ordering: .relaxed)
            if bytes > 0 { originBytes.add(bytes, ordering: .relaxed) }
        }
    }

    var totals: TrafficTotals {
        TrafficTotals(
            bytesFromCache: cacheBytes.load(ordering: .relaxed), bytesFromOrigin: originBytes.load(ordering: .relaxed),
            requestsFromCache: cacheRequests.load(ordering: .relaxed), requestsFromOrigin: originRequests.load(ordering: .relaxed))
    }
}
