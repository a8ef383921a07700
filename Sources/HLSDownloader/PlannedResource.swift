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
    /// For a whole-file AES-128 segment: its key's URL and IV, so the download can be checked by decrypting its
    /// last block (a wrong key, IV or a damaged body is `corrupted` at download time, not at playback).
    public var encryption: Encryption?

    public struct Encryption: Sendable, Hashable {
        public var keyURL: OriginURL
        public var iv: [UInt8]
    }

    /// A resource.
    public init(url: OriginURL, key: CacheKey, kind: CacheObjectKind, knownLength: Int64? = nil) {
        self.url = url
        self.key = key
        self.kind = kind
        self.knownLength = knownLength
    }
}
