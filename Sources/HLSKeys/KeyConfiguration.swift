import HLSCacheCore

/// Settings of the key service (the `keys.*` options of `hlscache serve`).
package struct KeyConfiguration: Sendable {
    /// The longest a fetched key is served before it is fetched again (`keys.ttl`, `--key-ttl`); `nil` leaves
    /// expiry to the item and the origin. Default 24 hours.
    package var ttl: Duration? = .seconds(24 * 3600)
    /// Who may receive keys besides loopback clients (`keys.allow`, `--keys-allow`).
    package var access: KeyAccessPolicy = KeyAccessPolicy()
    /// With a value, a background task renews stored keys this long before they expire, while the origin
    /// answers (`--key-auto-renew MINUTES`).
    package var autoRenewBefore: Duration?
    /// Key responses larger than this are not even read (an AES-128 key is 16 bytes).
    package var maxResponseBytes: Int = 1024
    /// Query parameters left out of the cache key a key id is derived from (as for cached resources).
    package var volatileQueryParameters: [String] = CacheKey.defaultVolatileParameters
    /// How many registrations (key URL → id) a process keeps in memory; the least recently named go first and are
    /// registered again when a playlist names them (their stored copies stay in `keys.sqlite`).
    package var registeredKeysLimit: Int = 100_000

    /// The defaults described on each property.
    package init() {}
}
