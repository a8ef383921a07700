#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import HLSCacheCore
import NIOHTTP1

/// How long a fetched key may be served (docs/design.md §7): the earliest of the item's expiry, the origin's
/// freshness for the key response, and the configured TTL.
package enum KeyExpiry {
    /// The expiry the origin gave the key response: `Cache-Control: max-age` (which wins, RFC 9111 §5.3),
    /// otherwise `Expires`. An `Expires` that is not a valid date means already expired (RFC 9111 §5.3).
    /// `nil` when the response says neither.
    package static func origin(headers: HTTPHeaders, now: Date) -> Date? {
        for value in headers[canonicalForm: "cache-control"] {
            for directive in value.split(separator: ",") {
                let parts = directive.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                guard parts.count == 2, parts[0].lowercased() == "max-age" else { continue }
                let text = parts[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                guard let seconds = Int64(text), seconds >= 0 else { return now }
                return now.addingTimeInterval(Double(min(seconds, 10 * 365 * 86_400)))
            }
        }
        if let expires = headers.first(name: "Expires") {
            return parseHTTPDate(expires) ?? now
        }
        return nil
    }

    /// The earliest of the given moments, `nil` when none is given.
    package static func earliest(_ dates: Date?...) -> Date? {
        dates.compactMap { $0 }.min()
    }

    /// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) as a date; obsolete forms give `nil`.
    static func parseHTTPDate(_ text: String) -> Date? {
        HTTPDate.parse(text).map { Date(timeIntervalSince1970: Double($0)) }
    }
}

/// The limit items put on a key they hold, as a registration sets it (``KeyService/register(_:itemExpiry:headers:)``).
package enum ItemExpiry: Sendable, Equatable {
    /// Leave the recorded limit as it is: the proxy naming the key in a playlist it serves.
    case unchanged
    /// No limit: an item holding the key never expires.
    case never
    /// The latest expiry among the items holding the key.
    case at(Date)
}
