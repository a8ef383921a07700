/// A parsed `Range` request header (RFC 9110 §14), resolved against the representation's size.
/// Only single byte ranges are honoured; anything else is served as the full representation, as the RFC allows.
package enum RangeRequest: Equatable, Sendable {
    /// No usable range: send 200 with the whole body.
    case full
    /// Send 206 with bytes `first...last` (inclusive).
    case partial(first: Int64, last: Int64)
    /// Send 416 with `Content-Range: bytes */size`.
    case unsatisfiable

    /// `bytes=0-`: the whole representation (ffmpeg and the players built on it ask this way for every segment).
    /// A miss answers it as a plain GET — one origin request that fills the cache — instead of a range relay plus
    /// a background fill (two origin requests per segment); RFC 9110 §14.2 lets a server ignore Range.
    package static func isWholeFromStart(_ header: String) -> Bool {
        let compact = header.filter { $0 != " " && $0 != "\t" }.lowercased()
        return compact == "bytes=0-"
    }

    package init(header: String?, size: Int64) {
        guard let header else {
            self = .full
            return
        }
        let trimmed = header.drop { $0 == " " }
        guard trimmed.lowercased().hasPrefix("bytes=") else {
            self = .full
            return
        }
        let spec = trimmed.dropFirst(6).trimmingSpaces()
        // Several ranges: multipart/byteranges is not worth it for HLS players; send the whole thing.
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else {
            self = .full
            return
        }
        let firstText = spec[..<dash].trimmingSpaces()
        let lastText = spec[spec.index(after: dash)...].trimmingSpaces()
        if firstText.isEmpty {
            // Suffix range: the last N bytes.
            guard let suffix = RangeRequest.number(lastText) else {
                self = .full
                return
            }
            guard suffix > 0, size > 0 else {
                self = .unsatisfiable
                return
            }
            self = .partial(first: max(0, size - suffix), last: size - 1)
            return
        }
        guard let first = RangeRequest.number(firstText) else {
            self = .full
            return
        }
        var last = size - 1
        if !lastText.isEmpty {
            guard let value = RangeRequest.number(lastText), value >= first else {
                self = .full  // syntactically invalid: ignore the header
                return
            }
            last = min(value, size - 1)
        }
        guard first < size else {
            self = .unsatisfiable
            return
        }
        self = .partial(first: first, last: last)
    }

    private static func number(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.count <= 18, text.utf8.allSatisfy({ ($0 &- UInt8(ascii: "0")) < 10 }) else { return nil }
        return Int64(text)
    }
}

extension Substring {
    func trimmingSpaces() -> Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s.removeFirst() }
        while s.last == " " || s.last == "\t" { s.removeLast() }
        return s
    }
}
