import HLSCacheCore

/// Evaluates `If-None-Match` / `If-Modified-Since` (RFC 9110 §13) for GET and HEAD against a cached object.
public enum ConditionalRequest {
    /// Whether the client's copy is current, so the answer is `304 Not Modified`.
    public static func isNotModified(ifNoneMatch: String?, ifModifiedSince: String?, etag: String, lastModified: Int64) -> Bool {
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
    public static func ifRangeAllowsPartial(_ ifRange: String?, etag: String, lastModified: Int64) -> Bool {
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
