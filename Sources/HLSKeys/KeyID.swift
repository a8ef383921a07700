import HLSCacheCore
import HLSCrypto

/// The name of a key on the proxy (`/keys/{keyid}`): the first 32 hex digits of the SHA-256 of the key URL's
/// ``CacheKey``, so a key keeps its id when its URL comes with a fresh signing token, and one key shared by
/// several renditions or playlists is one id.
package struct KeyID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// 32 lowercase hexadecimal characters.
    package let value: String

    /// The id of the key behind `cacheKey`.
    package init(_ cacheKey: CacheKey) {
        value = String(SHA256.hex(cacheKey.value).prefix(32))
    }

    /// Parses an id from a request path or the command line; `nil` unless 32 hexadecimal characters.
    package init?(_ text: some StringProtocol) {
        guard text.utf8.count == 32, text.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) || (65...70).contains($0) })
        else { return nil }
        value = text.lowercased()
    }

    /// The short path of the key (`/keys/{keyid}`): served by a process that knows the key.
    package var path: String { "/keys/\(value)" }

    /// The path a rewritten playlist points at: `/keys/{keyid}` followed by the key URL's proxy path
    /// (`/keys/{keyid}/https/cdn.example.com/k/1.key`). Any server can answer it, one that never saw the playlist
    /// included (a fleet behind a load balancer hashing paths: the key lands on a node of its own), since the id
    /// is checked against the URL it names.
    package func path(for url: OriginURL) -> String { path + url.proxyPath }

    package var description: String { value }
    package static func < (lhs: Self, rhs: Self) -> Bool { lhs.value < rhs.value }
}
