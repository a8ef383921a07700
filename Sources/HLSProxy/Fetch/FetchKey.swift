import HLSCacheCore

/// What one origin download is shared under (``FetchRegistry``): concurrent misses with equal fetch keys share
/// one ``SharedFetch``.
///
/// A cacheable resource is fetched under its ``CacheKey``, so requests that differ only in volatile query parameters
/// (tokens) share the download that fills the cache. A request that is not cached (an LL-HLS blocking reload, which
/// asks the origin for a state that has not happened yet) is fetched under its full origin URL: it shares only with
/// the same request and never with the cacheable download of its key.
struct FetchKey: Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case stored(CacheKey)
        case perRequest(String)
    }

    private let kind: Kind

    /// The download that fills the cache entry `key`.
    static func stored(_ key: CacheKey) -> FetchKey { FetchKey(kind: .stored(key)) }

    /// A download of `url` that is not stored.
    static func perRequest(_ url: OriginURL) -> FetchKey { FetchKey(kind: .perRequest(url.string)) }

    /// The key of a download of `url`, stored under `key` when `cacheable`.
    init(key: CacheKey, url: OriginURL, cacheable: Bool) {
        self = cacheable ? .stored(key) : .perRequest(url)
    }

    private init(kind: Kind) {
        self.kind = kind
    }

    /// Whether the download fills the cache.
    var isStored: Bool {
        if case .stored = kind { return true }
        return false
    }

    /// The cache key, `stored` fetch keys only.
    var cacheKey: CacheKey? {
        if case .stored(let key) = kind { return key }
        return nil
    }

    var description: String {
        switch kind {
        case .stored(let key): key.value
        case .perRequest(let url): "not stored: " + url
        }
    }
}
