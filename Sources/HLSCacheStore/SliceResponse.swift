import Foundation
import HLSCacheCore

/// What an origin's `206` answer to a slice request says (RFC 9110 §14.4): which bytes it carries, the whole
/// object's size, and the validator that names its version. Pure; the proxy and the downloader check every slice
/// response with it, as nginx's slice module checks each subrequest's `Content-Range` and `ETag` against the first.
package struct SliceResponse: Sendable, Hashable {
    /// First and last byte (inclusive) of the body.
    package var first: Int64
    package var last: Int64
    /// The whole object's size.
    package var total: Int64
    /// The origin's strong `ETag`, or one made from its `Last-Modified` and the size; slices of one version share it.
    package var validator: String

    /// Reads a `206` answer's `Content-Range` and validators. Nil when it cannot be used for slices: no
    /// `Content-Range: bytes first-last/total` with a known total, or neither a strong `ETag` nor a `Last-Modified`
    /// to tell versions apart (then slices of two versions could not be told apart, and the object is not sliced).
    package init?(contentRange: String?, strongETag: String?, lastModified: String?) {
        guard let contentRange, let parsed = Self.parse(contentRange),
            let validator = Self.validator(strongETag: strongETag, lastModified: lastModified, total: parsed.total)
        else { return nil }
        (first, last, total) = parsed
        self.validator = validator
    }

    /// The validator slices of an object of `total` bytes are stored with: its strong `ETag`, else one made from its
    /// `Last-Modified` and the size; nil without either (versions could not be told apart). The same for a `206` and
    /// for a whole `200` answer, so a whole download's slices and a range's are one version.
    package static func validator(strongETag: String?, lastModified: String?, total: Int64) -> String? {
        if let strongETag { return strongETag }
        guard let lastModified, let seconds = HTTPDate.parse(lastModified) else { return nil }
        return "\"lm-\(String(seconds, radix: 16))-\(String(total, radix: 16))\""
    }

    /// Parses `bytes first-last/total` (a known total only).
    package static func parse(_ header: String) -> (first: Int64, last: Int64, total: Int64)? {
        let text = header.trimmingCharacters(in: .whitespaces)
        guard text.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = text.dropFirst(6).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let total = number(parts[1]) else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard bounds.count == 2, let first = number(bounds[0]), let last = number(bounds[1]), first <= last, last < total else {
            return nil
        }
        return (first, last, total)
    }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int64(text)
    }
}
