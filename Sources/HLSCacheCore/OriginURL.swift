import HLSPlaylist

/// A validated absolute `http`/`https` origin URL and its place in the proxy's URL space (docs/design.md §3):
/// `https://cdn.example.com/vod/a.m3u8?t=1` ⇄ `/https/cdn.example.com/vod/a.m3u8?t=1`.
package struct OriginURL: Sendable, Hashable, CustomStringConvertible {
    /// `http` or `https`, lowercased.
    package let scheme: String
    /// The host as written but lowercased; IPv6 literals keep their brackets.
    package let host: String
    /// The explicit port, if any.
    package let port: Int?
    /// The path, starting with `/`, percent-encoding kept.
    package let path: String
    /// The query without `?`, if any.
    package let query: String?

    /// Parses an absolute URL. Characters that may not appear in a URL (spaces, non-ASCII, quotes) are
    /// percent-encoded; existing `%XX` escapes are kept; the fragment is dropped.
    package init(_ string: String) throws {
        let reference = URIReference(parsing: string)
        guard let scheme = reference.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw OriginURLError.unsupportedScheme.with("only http and https origins are proxied")
        }
        guard let authority = reference.authority, !authority.isEmpty else {
            throw OriginURLError.invalidAuthority.with("the URL has no host")
        }
        try self.init(scheme: scheme, authority: authority, path: reference.path, query: reference.query)
    }

    /// Parses a proxy request target (`/https/host[:port]/path?query`) back to the origin URL.
    /// Rejects dot segments (plain or percent-encoded) so the proxy URL space cannot be escaped.
    package init(proxyTarget target: String) throws {
        let u = Array(target.utf8)
        guard u.first == UInt8(ascii: "/") else { throw OriginURLError.invalidProxyPath.with("the path must start with /") }
        var i = 1
        while i < u.count, u[i] != UInt8(ascii: "/") { i += 1 }
        let scheme = String(decoding: u[1..<i], as: UTF8.self)
        guard scheme == "http" || scheme == "https" else {
            throw OriginURLError.invalidProxyPath.with("the path must start with /http/ or /https/")
        }
        guard i < u.count else { throw OriginURLError.invalidAuthority.with("the path has no origin host") }
        let authorityStart = i + 1
        var j = authorityStart
        while j < u.count, u[j] != UInt8(ascii: "/"), u[j] != UInt8(ascii: "?"), u[j] != UInt8(ascii: "#") { j += 1 }
        let authority = OriginURL.unescapingLiteralDelimiters(u[authorityStart..<j])
        // Split path, query and fragment by hand: parsed as a URI reference, a path starting with "//" (an origin
        // URL like https://cdn//vod/seg.ts) would be taken for an authority and a segment silently dropped.
        var end = j
        while end < u.count, u[end] != UInt8(ascii: "#") { end += 1 }
        var queryStart = j
        while queryStart < end, u[queryStart] != UInt8(ascii: "?") { queryStart += 1 }
        let path = String(decoding: u[j..<queryStart], as: UTF8.self)
        let query = queryStart < end ? String(decoding: u[(queryStart + 1)..<end], as: UTF8.self) : nil
        guard !OriginURL.hasDotSegment(path) else {
            throw OriginURLError.pathTraversal.with("dot segments are not allowed in proxied paths")
        }
        // The path and query are sent to the origin as the octets the player sent: a malformed escape has no
        // meaning to forward, and an escape the origin client cannot send as it is must not become another path.
        if let problem = OriginURL.escapeProblem(u[j..<queryStart], inPath: true)
            ?? OriginURL.escapeProblem(u[min(queryStart + 1, end)..<end], inPath: false)
        {
            throw OriginURLError.invalidEscape.with(problem)
        }
        try self.init(scheme: scheme, authority: authority, path: path, query: query)
    }

    /// Why the percent escapes of a path or query cannot be forwarded exactly, or nil when they can: a `%` not
    /// followed by two hexadecimal digits is malformed (RFC 3986 §2.1). Escapes are octets: what they decode to
    /// (UTF-8 text or not, `%E9` alone) does not matter, the origin gets them as written.
    package static func escapeProblem(_ bytes: ArraySlice<UInt8>, inPath: Bool) -> String? {
        guard bytes.contains(UInt8(ascii: "%")) else { return nil }
        var i = bytes.startIndex
        while i < bytes.endIndex {
            guard bytes[i] == UInt8(ascii: "%") else {
                i += 1
                continue
            }
            guard i + 2 < bytes.endIndex, hexValue(bytes[i + 1]) != nil, hexValue(bytes[i + 2]) != nil else {
                let shown = String(decoding: bytes[i..<min(i + 3, bytes.endIndex)], as: UTF8.self)
                return "malformed percent escape \(shown) in the \(inPath ? "path" : "query"): % must be followed by two hexadecimal digits"
            }
            i += 3
        }
        return nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The authority segment of a proxy path as text, with `%5B`, `%5D` and `%3A` (either case) turned back into
    /// `[`, `]` and `:`: clients built on URL types escape the brackets of an IPv6 literal in a path
    /// (`/http/%5B::1%5D:8080/…`). Any other escape stays as it is, and the host check refuses it.
    static func unescapingLiteralDelimiters(_ bytes: ArraySlice<UInt8>) -> String {
        guard bytes.contains(UInt8(ascii: "%")) else { return String(decoding: bytes, as: UTF8.self) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == UInt8(ascii: "%"), i + 2 < bytes.endIndex {
                let code = String(decoding: bytes[(i + 1)...(i + 2)], as: UTF8.self).uppercased()
                let plain: UInt8? =
                    code == "5B" ? UInt8(ascii: "[") : code == "5D" ? UInt8(ascii: "]") : code == "3A" ? UInt8(ascii: ":") : nil
                if let plain {
                    out.append(plain)
                    i += 3
                    continue
                }
            }
            out.append(bytes[i])
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    private init(scheme: String, authority: String, path: String, query: String?) throws {
        self.scheme = scheme
        let (host, port) = try OriginURL.splitAuthority(authority)
        self.host = host
        self.port = port
        let encodedPath = OriginURL.encodeInvalid(path, allowQueryChars: false)
        self.path = encodedPath.isEmpty ? "/" : encodedPath
        self.query = query.map { OriginURL.encodeInvalid($0, allowQueryChars: true) }
    }

    /// `host` or `host:port` as it appears in the URL.
    package var authority: String { port.map { "\(host):\($0)" } ?? host }

    /// The port the origin is reached on (explicit or the scheme's default).
    package var effectivePort: Int { port ?? (scheme == "https" ? 443 : 80) }

    /// The absolute URL.
    package var string: String { "\(scheme)://\(authority)\(path)\(query.map { "?\($0)" } ?? "")" }
    package var description: String { string }
    /// The URL for logs: the query (signed URLs carry tokens in it) shown as `?…`.
    package var redacted: String { "\(scheme)://\(authority)\(path)\(query == nil ? "" : "?…")" }

    /// Whether the path or query holds a character RFC 3986 does not allow but ``encodeInvalid(_:allowQueryChars:)``
    /// keeps as written (`[`, `]`, `|`, `^`, `` ` ``, `{`, `}`): URL types would escape it before sending.
    package var hasLiteralUnsafeCharacters: Bool {
        func unsafe(_ c: UInt8) -> Bool {
            c == UInt8(ascii: "[") || c == UInt8(ascii: "]") || c == UInt8(ascii: "|") || c == UInt8(ascii: "^")
                || c == UInt8(ascii: "`") || c == UInt8(ascii: "{") || c == UInt8(ascii: "}")
        }
        return path.utf8.contains(where: unsafe) || (query?.utf8.contains(where: unsafe) ?? false)
    }

    /// The path and query on the proxy: `/https/host/path?query`.
    package var proxyPath: String { "/\(scheme)/\(authority)\(path)\(query.map { "?\($0)" } ?? "")" }

    /// The proxy URL given the proxy's own base (`http://127.0.0.1:8080`).
    package func proxyURL(base: String) -> String {
        var base = base
        while base.hasSuffix("/") { base.removeLast() }
        return base + proxyPath
    }

    /// The last path segment's extension, lowercased (`ts`, `m3u8`), used to pick a Content-Type.
    package var pathExtension: String? {
        guard let lastSegment = path.split(separator: "/").last, let dot = lastSegment.lastIndex(of: ".") else { return nil }
        let ext = lastSegment[lastSegment.index(after: dot)...]
        return ext.isEmpty ? nil : ext.lowercased()
    }

    static func splitAuthority(_ authority: String) throws -> (String, Int?) {
        guard !authority.isEmpty else { throw OriginURLError.invalidAuthority.with("empty host") }
        guard !authority.contains("@") else {
            throw OriginURLError.invalidAuthority.with("credentials in the URL are not supported; configure origin headers instead")
        }
        var host = Substring(authority)
        var portText: Substring?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw OriginURLError.invalidAuthority.with("unterminated IPv6 literal") }
            let literal = host[host.index(after: host.startIndex)..<close]
            guard !literal.isEmpty, literal.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw OriginURLError.invalidAuthority.with("invalid IPv6 literal")
            }
            let after = host[host.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw OriginURLError.invalidAuthority.with("garbage after IPv6 literal") }
                portText = after.dropFirst()
            }
            host = host[...close]
        } else if let colon = host.lastIndex(of: ":") {
            portText = host[host.index(after: colon)...]
            host = host[..<colon]
        }
        guard !host.isEmpty else { throw OriginURLError.invalidAuthority.with("empty host") }
        if !host.hasPrefix("[") {
            guard
                host.utf8.allSatisfy({ c in
                    URIReference.isAlpha(c) || (c &- UInt8(ascii: "0")) < 10 || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")
                        || c == UInt8(ascii: "_") || c == UInt8(ascii: "~")
                })
            else {
                throw OriginURLError.invalidAuthority.with("invalid character in host")
            }
        }
        var port: Int?
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, let value = Int(portText), (1...65535).contains(value) else {
                throw OriginURLError.invalidAuthority.with("invalid port")
            }
            port = value
        }
        return (host.lowercased(), port)
    }

    /// Whether a path has a `.` or `..` segment, also when written as `%2e`.
    static func hasDotSegment(_ path: String) -> Bool {
        // Split on the byte '/', not on Characters: a combining mark after '/' forms one grapheme with it, and
        // "/../\u{0711}x" would otherwise hide its ".." segment (found by Fuzz/run-request.sh).
        for segment in path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            var dots = 0
            var i = segment.startIndex
            var isDots = true
            while i < segment.endIndex {
                if segment[i] == UInt8(ascii: ".") {
                    dots += 1
                    i = segment.index(after: i)
                } else if segment[i] == UInt8(ascii: "%"), segment.distance(from: i, to: segment.endIndex) >= 3,
                    segment[segment.index(i, offsetBy: 1)] == UInt8(ascii: "2"),
                    segment[segment.index(i, offsetBy: 2)] | 0x20 == UInt8(ascii: "e")
                {
                    dots += 1
                    i = segment.index(i, offsetBy: 3)
                } else {
                    isDots = false
                    break
                }
            }
            if isDots && (dots == 1 || dots == 2) { return true }
        }
        return false
    }

    private static let hex: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Percent-encodes the bytes a request line cannot carry as written — spaces, controls, `"`, `<`, `>`, `\`,
    /// bytes above 0x7F (as the octets they are: `%E9`, `%C3%A9`) — leaving `%XX` escapes as they are. The
    /// printable characters RFC 3986 does not allow but origins and players send as written (`[`, `]`, `|`, `^`,
    /// `` ` ``, `{`, `}`) stay: ffmpeg sends them so, browsers leave `[`, `]`, `|`, `^` unescaped in paths, and an
    /// origin matching paths literally would answer another resource for `%5B` (docs/origin.md).
    static func encodeInvalid(_ text: String, allowQueryChars: Bool) -> String {
        func allowed(_ c: UInt8) -> Bool {
            if URIReference.isAlpha(c) || (c &- UInt8(ascii: "0")) < 10 { return true }
            switch c {
            case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "!"), UInt8(ascii: "$"),
                UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"),
                UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"),
                UInt8(ascii: "%"):
                return true
            case UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: "|"), UInt8(ascii: "^"), UInt8(ascii: "`"), UInt8(ascii: "{"),
                UInt8(ascii: "}"):
                return true
            case UInt8(ascii: "?"): return allowQueryChars
            default: return false
            }
        }
        guard !text.utf8.allSatisfy(allowed) else { return text }
        var out: [UInt8] = []
        for c in text.utf8 {
            if allowed(c) {
                out.append(c)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(c >> 4)])
                out.append(hex[Int(c & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Why a URL cannot be proxied.
package struct OriginURLError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Sendable, Hashable {
        case unsupportedScheme, invalidAuthority, invalidProxyPath, pathTraversal, invalidEscape
    }
    private var code: Code
    package private(set) var detail: String = ""

    package var name: String { code.rawValue }
    package static let unsupportedScheme = OriginURLError(code: .unsupportedScheme)
    package static let invalidAuthority = OriginURLError(code: .invalidAuthority)
    package static let invalidProxyPath = OriginURLError(code: .invalidProxyPath)
    package static let pathTraversal = OriginURLError(code: .pathTraversal)
    package static let invalidEscape = OriginURLError(code: .invalidEscape)

    func with(_ detail: String) -> OriginURLError {
        var copy = self
        copy.detail = detail
        return copy
    }
    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(code) }
    package var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }
}
