import HLSCacheCore
import HLSCrypto

/// The name of a key on the proxy (`/keys/{keyid}`): the first 32 hex digits of the SHA-256 of the key URL's
/// ``CacheKey``, so a key keeps its id when its URL comes with a fresh signing token, and one key shared by
/// several renditions or playlists is one id.
public struct KeyID: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// 32 lowercase hexadecimal characters.
    public let value: String

    /// The id of the key behind `cacheKey`.
    public init(_ cacheKey: CacheKey) {
        value = String(SHA256.hex(cacheKey.value).prefix(32))
    }

    /// Parses an id from a request path or the command line; `nil` unless 32 hexadecimal characters.
    public init?(_ text: some StringProtocol) {
        guard text.utf8.count == 32, text.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) || (65...70).contains($0) })
        else { return nil }
        value = text.lowercased()
    }

    /// The path a rewritten playlist points at.
    public var path: String { "/keys/\(value)" }

    public var description: String { value }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.value < rhs.value }
}
