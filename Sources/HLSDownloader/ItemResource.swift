/// One object of an item, as the items table remembers it: so `lock`, `rm` and expiry know which cache
/// objects belong to the item, and progress survives a restart.
public struct ItemResource: Sendable, Hashable, Codable {
    /// The cache key (``HLSCacheCore/CacheKey/value``).
    public var key: String
    /// The origin URL.
    public var url: String
    /// The object kind (`playlist`, `segment`, `init`, `key`).
    public var kind: String
    /// Its size once stored.
    public var size: Int64?
    /// Whether it has been stored (or found stored).
    public var done: Bool

    /// A resource row.
    public init(key: String, url: String, kind: String, size: Int64? = nil, done: Bool = false) {
        self.key = key
        self.url = url
        self.kind = kind
        self.size = size
        self.done = done
    }
}
