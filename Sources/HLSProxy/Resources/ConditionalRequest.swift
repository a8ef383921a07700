import HLSCacheCore

/// Evaluates the preconditions of RFC 9110 §13 for GET and HEAD against a cached object, in the order of §13.2.2:
/// `If-Match` / `If-Unmodified-Since` (412), then `If-None-Match` / `If-Modified-Since` (304), then `If-Range`.
package enum ConditionalRequest {
    /// Whether `If-Match` (strong comparison; `*`: the object exists, which it does) or, without it,
    /// `If-Unmodified-Since` (ignored when not a date) fails, so the answer is `412 Precondition Failed`.
    package static func preconditionFails(ifMatch: String?, ifUnmodifiedSince: String?, etag: String, lastModified: Int64) -> Bool {
        if let ifMatch {
            let trimmed = ifMatch.trimmingCharacters()
            if trimmed == "*" { return false }
            // A weak tag never matches strongly, on either side.
            guard !etag.hasPrefix("W/") else { return true }
            return !trimmed.split(separator: ",").contains { Substring($0).trimmingSpaces() == etag }
        }
        if let ifUnmodifiedSince, let since = HTTPDate.parse(ifUnmodifiedSince) {
            return lastModified > since
        }
        return false
    }

    /// Whether the client's copy is current, so the answer is `304 Not Modified`.
    package static func isNotModified(ifNoneMatch: String?, ifModifiedSince: String?, etag: String, lastModified: Int64) -> Bool {
        if let ifNoneMatch {
            // If-None-Match takes precedence; If-Modified-Since is then ignored.
            return etagListMatches(ifNoneMatch, etag: etag)
        }
        if let ifModifiedSince, let since = HTTPDate.parse(ifModifiedSince) {
            return lastModified <= since
        }
        return false
    }

    /// `If-Range`: the Range header applies only if the validator still matches (strong comparison for ETags).
    package static func ifRangeAllowsPartial(_ ifRange: String?, etag: String, lastModified: Int64) -> Bool {
        guard let ifRange = ifRange?.trimmingCharacters() else { return true }
        if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") { return !ifRange.hasPrefix("W/") && ifRange == etag }
        guard let date = HTTPDate.parse(ifRange) else { return false }
        return date == lastModified
    }

    /// Weak comparison of an entity-tag list (`"a", W/"b"` or `*`) against `etag`.
    static func etagListMatches(_ list: String, etag: String) -> Bool {
        let trimmed = list.trimmingCharacters()
        if trimmed == "*" { return true }
        let opaque = etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
        for candidate in trimmed.split(separator: ",") {
            var tag = Substring(candidate).trimmingSpaces()
            if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
            if tag == opaque { return true }
        }
        return false
    }
}

extension String {
    func trimmingCharacters() -> String { String(Substring(self).trimmingSpaces()) }
}
