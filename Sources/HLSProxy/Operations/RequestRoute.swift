/// What kind of request an exchange was, for metrics and the access log. A closed set: metric labels never
/// carry a URL.
package enum RequestRoute: Int, Sendable, CaseIterable {
    case playlist, segment, key, api, metrics, health, other

    /// The label value (`route="segment"`).
    package var label: String {
        switch self {
        case .playlist: "playlist"
        case .segment: "segment"
        case .key: "key"
        case .api: "api"
        case .metrics: "metrics"
        case .health: "health"
        case .other: "other"
        }
    }

    /// The route a request target falls under before anything is known about the answer; proxied resources
    /// start as `segment` (or `playlist` for `.m3u8`/`.m3u` paths) and are refined when the answer is known.
    static func classify(path: Substring) -> RequestRoute {
        let utf8 = path.utf8
        guard utf8.count > 1 else { return .other }
        if utf8.hasPrefix("/https/") || utf8.hasPrefix("/http/") || utf8.hasPrefix("/rewind/") {
            return utf8.hasSuffix(".m3u8") || utf8.hasSuffix(".m3u") ? .playlist : .segment
        }
        if utf8.hasPrefix("/keys/") { return .key }
        if utf8.hasPrefix("/api/") || path == "/api" { return .api }
        if path == "/metrics" { return .metrics }
        if path == "/healthz" || path == "/readyz" { return .health }
        return .other
    }
}

// Byte-wise prefix and suffix tests for request paths: `Substring.hasPrefix` compares Characters (grapheme
// breaking), a visible cost when every request is classified and routed.
extension Substring.UTF8View {
    func hasPrefix(_ prefix: StaticString) -> Bool {
        let bytes = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        return starts(with: bytes)
    }

    func hasSuffix(_ suffix: StaticString) -> Bool {
        let length = suffix.utf8CodeUnitCount
        guard count >= length else { return false }
        return self.suffix(length).elementsEqual(UnsafeBufferPointer(start: suffix.utf8Start, count: length))
    }
}

/// Where the body of a proxied answer came from (the access log's `cache` field and
/// `hlscache_cache_requests_total{result}`).
package enum CacheResult: Int, Sendable, CaseIterable {
    /// Not a proxied resource (API, health, metrics, keys) or answered before the cache was asked (a 400).
    case none
    /// From the disk cache (sendfile), including 304 answers to conditional requests.
    case hit
    /// A live playlist still fresh in memory.
    case live
    /// Not cached: this request started the origin download.
    case miss
    /// Not cached: this request joined an origin download already in flight.
    case coalesced
    /// Relayed from the origin without caching (a Range request on a miss, LL-HLS blocking reloads).
    case passthrough

    package var label: String {
        switch self {
        case .none: "-"
        case .hit: "hit"
        case .live: "live"
        case .miss: "miss"
        case .coalesced: "coalesced"
        case .passthrough: "passthrough"
        }
    }

    /// The `source` label of `hlscache_served_bytes_total`, or nil when the bytes are not counted there.
    var source: ByteSource? {
        switch self {
        case .none: nil
        case .hit: .disk
        case .live: .memory
        case .miss, .coalesced, .passthrough: .origin
        }
    }
}

/// Where served body bytes came from.
enum ByteSource: Int, CaseIterable {
    case disk, memory, origin

    var label: String {
        switch self {
        case .disk: "disk"
        case .memory: "memory"
        case .origin: "origin"
        }
    }
}
