import HLSPlaylist

extension OriginURL {
    /// Kodi's request headers after a URL (`…/one.m3u8|User-Agent=Kodi%2F20&Referer=http%3A%2F%2F…`): a player that
    /// does not know the convention (VLC, mpv, ffmpeg given a channel list's URL) sends them to the proxy as part of
    /// the target, `|` as written or as `%7C`. Returns the target without them and the headers (values
    /// percent-decoded), or nil when the target has no such suffix.
    ///
    /// Read as a suffix only when everything after the first `|` past the authority is `Name=value` items joined by
    /// `&`, each name made of letters, digits, `-`, `_` and `.`: a `|` that is part of an origin's path (`/a|b.ts`)
    /// stays and reaches the origin as written.
    package static func splittingHeaderSuffix(of target: String) -> (target: String, headers: [(name: String, value: String)])? {
        let u = Array(target.utf8)
        // Past `/scheme/authority`.
        var slashes = 0
        var i = 0
        while i < u.count, slashes < 3 {
            if u[i] == UInt8(ascii: "/") { slashes += 1 }
            i += 1
        }
        while i < u.count {
            var suffixStart: Int?
            if u[i] == UInt8(ascii: "|") {
                suffixStart = i + 1
            } else if u[i] == UInt8(ascii: "%"), i + 2 < u.count, u[i + 1] == UInt8(ascii: "7"), u[i + 2] | 0x20 == UInt8(ascii: "c") {
                suffixStart = i + 3
            }
            if let start = suffixStart {
                let suffix = String(decoding: u[start...], as: UTF8.self)
                guard isHeaderList(suffix) else { return nil }
                // A value that decodes to a control character (`%0D%0A`) is left out: it cannot be sent.
                let headers = Playlist.headerList(suffix).filter { $0.value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) } }
                    .map { (name: $0.name, value: $0.value) }
                return (String(decoding: u[..<i], as: UTF8.self), headers)
            }
            i += 1
        }
        return nil
    }

    private static func isHeaderList(_ text: String) -> Bool {
        let items = text.split(separator: "&", omittingEmptySubsequences: false)
        guard !items.isEmpty else { return false }
        return items.allSatisfy { item in
            guard let equals = item.firstIndex(of: "="), equals > item.startIndex else { return false }
            return item[..<equals].utf8.allSatisfy { c in
                URIReference.isAlpha(c) || (c &- UInt8(ascii: "0")) < 10 || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
                    || c == UInt8(ascii: ".")
            }
        }
    }
}
