/// The identity of a cached resource: its origin URL without volatile query parameters (signed-URL tokens),
/// so a prewarmed stream is still a hit when the player comes back with a fresh token (docs/design.md §3).
package struct CacheKey: Sendable, Hashable, CustomStringConvertible {
    /// The normalised URL string that names the resource.
    package let value: String
    /// `value`'s hash, computed once: a request looks its key up in several tables (memory tier, key registrations,
    /// playlists, read-ahead), and hashing the whole URL each time was a visible part of a hit.
    let valueHash: Int

    package static func == (lhs: CacheKey, rhs: CacheKey) -> Bool {
        lhs.valueHash == rhs.valueHash && lhs.value == rhs.value
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(valueHash)
    }

    /// Query parameters dropped by default: CDN signing tokens that change per viewer or per hour.
    package static let defaultVolatileParameters: [String] = [
        "token", "hdnts", "hdntl", "Expires", "Signature", "Policy", "Key-Pair-Id",
    ]

    /// - Parameter volatileParameters: names compared case-insensitively.
    package init(_ url: OriginURL, volatileParameters: [String] = CacheKey.defaultVolatileParameters) {
        var authority = url.host
        if let port = url.port, port != (url.scheme == "https" ? 443 : 80) { authority += ":\(port)" }
        var key = "\(url.scheme)://\(authority)\(url.path)"
        if let query = url.query {
            let volatile = Set(volatileParameters.map { $0.lowercased() })
            let kept = query.split(separator: "&", omittingEmptySubsequences: true).filter { pair in
                let name = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0]
                return !volatile.contains(name.lowercased())
            }
            if !kept.isEmpty { key += "?" + kept.joined(separator: "&") }
        }
        value = key
        valueHash = key.hashValue
    }

    package var description: String { value }

    /// The volatile parameters of `url` (its tokens), sorted: what the key leaves out. Two requests for one key
    /// with different signatures carry different tokens.
    package static func volatileSignature(_ url: OriginURL, volatileParameters: [String] = CacheKey.defaultVolatileParameters) -> String {
        guard let query = url.query else { return "" }
        let volatile = Set(volatileParameters.map { $0.lowercased() })
        return query.split(separator: "&", omittingEmptySubsequences: true).filter { pair in
            volatile.contains(pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0].lowercased())
        }.sorted().joined(separator: "&")
    }
}
