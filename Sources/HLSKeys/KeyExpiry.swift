#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import NIOHTTP1

/// How long a fetched key may be served (DESIGN.md §7): the earliest of the item's expiry, the origin's
/// freshness for the key response, and the configured TTL.
public enum KeyExpiry {
    /// The expiry the origin gave the key response: `Cache-Control: max-age` (which wins, RFC 9111 §5.3),
    /// otherwise `Expires`. An `Expires` that is not a valid date means already expired (RFC 9111 §5.3).
    /// `nil` when the response says neither.
    public static func origin(headers: HTTPHeaders, now: Date) -> Date? {
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
    public static func earliest(_ dates: Date?...) -> Date? {
        dates.compactMap { $0 }.min()
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the only form a sender may produce
    /// (RFC 9110 §5.6.7); obsolete forms give `nil`.
    static func parseHTTPDate(_ text: String) -> Date? {
        let fields = text.split(separator: " ")
        guard fields.count == 6, fields[5] == "GMT", let day = Int32(fields[1]), let month = months.firstIndex(of: String(fields[2])),
            let year = Int32(fields[3])
        else { return nil }
        let clock = fields[4].split(separator: ":")
        guard clock.count == 3, let hour = Int32(clock[0]), let minute = Int32(clock[1]), let second = Int32(clock[2]),
            (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second), year >= 1970
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = Int32(month)
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Date(timeIntervalSince1970: Double(timegm(&parts)))
    }
}
