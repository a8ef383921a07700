import Foundation
import HLSCacheCore
import NIOHTTP1

/// The status line and headers of an origin response, after redirects.
package struct OriginResponseHead: Sendable {
    /// The status code (200, 206, 304, 404, …).
    package var status: Int
    /// The response headers as the origin sent them.
    package var headers: HTTPHeaders
    /// The declared body length, from `Content-Length`; `nil` when absent (chunked or close-delimited).
    package var contentLength: Int?
    /// The URL that answered: the requested one, or the last redirect target. Playlists resolve their
    /// relative URIs against it.
    package var url: OriginURL

    /// How long the origin asks to be left alone (`Retry-After`, RFC 9110 §10.2.3: seconds or an HTTP date),
    /// for 429 and 503 answers; `nil` when absent, malformed or in the past.
    package var retryAfter: Duration? {
        guard status == 429 || status == 503, let value = headers.first(name: "Retry-After")?.trimmedOWS(), !value.isEmpty else {
            return nil
        }
        if let seconds = Int(value) { return seconds > 0 ? .seconds(seconds) : nil }
        guard let date = HTTPDate.parse(value) else { return nil }
        let seconds = date - Int64(Date().timeIntervalSince1970)
        return seconds > 0 ? .seconds(seconds) : nil
    }

    /// The origin's `ETag` when it is one well-formed strong entity-tag (`"…"`, RFC 9110 §8.8.3): it names these
    /// exact bytes, so a cache may serve it with them. Nil when absent, weak (`W/"…"`), repeated or malformed.
    package var strongETag: String? {
        let tags = headers["ETag"]
        guard tags.count == 1, let tag = tags.first?.trimmedOWS(), tag.utf8.count >= 2, tag.utf8.count <= 256, tag.hasPrefix("\""),
            tag.hasSuffix("\"")
        else { return nil }
        // etagc: %x21 / %x23-7E / obs-text — no DQUOTE, space or control inside.
        let opaque = tag.utf8.dropFirst().dropLast()
        return opaque.allSatisfy { $0 == 0x21 || ($0 >= 0x23 && $0 != 0x7F) } ? tag : nil
    }

    /// Creates a head.
    package init(status: Int, headers: HTTPHeaders, url: OriginURL) {
        self.status = status
        self.headers = headers
        self.url = url
        // Repeated Content-Length headers count only when they agree (RFC 9110 §8.6).
        let lengths = headers["Content-Length"].map { $0.trimmedOWS() }
        if let first = lengths.first, let value = Int(first), value >= 0, lengths.allSatisfy({ $0 == first }) {
            self.contentLength = value
        } else {
            self.contentLength = nil
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate func trimmedOWS() -> String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return String(s)
    }
}
