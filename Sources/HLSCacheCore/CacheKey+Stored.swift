extension CacheKey {
    /// Rebuilds a key from its ``value`` as previously stored (the cache index), without normalising again:
    /// the stored text is already normalised, and re-parsing could change a key written by an older version.
    package init(storedValue: String) {
        value = storedValue
        valueHash = storedValue.hashValue
    }
}
