import HLSCacheCore
import HLSCacheStore

/// One origin resource an item stores: a playlist, a segment file (whole, even when the playlist addresses
/// byte ranges of it), an init section or a key.
public struct PlannedResource: Sendable, Hashable {
    /// The absolute origin URL.
    public var url: OriginURL
    /// The cache key it is stored under.
    public var key: CacheKey
    /// The object kind given to the store.
    public var kind: CacheObjectKind
    /// Bytes the playlist already tells (sum of byte ranges), if any.
    public var knownLength: Int64?

    /// A resource.
    public init(url: OriginURL, key: CacheKey, kind: CacheObjectKind, knownLength: Int64? = nil) {
        self.url = url
        self.key = key
        self.kind = kind
        self.knownLength = knownLength
    }
}
