/// Which web pages may read what hlscache serves (`http.allowedWebOrigins`, docs/design.md §7).
///
/// "Loopback clients only" must hold when the loopback client is a browser showing a hostile page: the browser is on
/// the machine, the page is not. Browsers name the page behind a request in `Origin` (CORS requests, and every
/// request that is not a GET or HEAD) and, for the rest, in `Sec-Fetch-Site` and `Referer`. The default allows pages
/// served from loopback hosts (`localhost`, `*.localhost`, `127.0.0.0/8`, `[::1]`, any scheme and port) and requests
/// made by no page at all (native players, ffmpeg, curl, a URL typed into the address bar), as local development
/// servers now default to.
package struct WebOriginPolicy: Sendable, Hashable, CustomStringConvertible {
    /// One entry of the list.
    package enum Entry: Sendable, Hashable, CustomStringConvertible {
        /// `*`: every page (CORS for any page, as a public CDN grants it; a start-up warning says so).
        case any
        /// `loopback`: pages served from `localhost`, `*.localhost`, `127.0.0.0/8` or `[::1]`, any scheme and port.
        case loopback
        /// `null`: opaque origins (`file://` pages, sandboxed frames). Hostile pages can make one, so never by default.
        case opaque
        /// An exact origin, `scheme://host[:port]`, normalised (lowercase, no default port).
        case origin(String)

        package var description: String {
            switch self {
            case .any: "*"
            case .loopback: "loopback"
            case .opaque: "null"
            case .origin(let origin): origin
            }
        }
    }

    package let entries: [Entry]

    /// Pages on loopback hosts, and requests made by no page.
    package static let `default` = WebOriginPolicy(entries: [.loopback])

    package init(entries: [Entry]) {
        self.entries = entries
    }

    /// Parses the setting's list: `*`, `loopback`, `null` or origins such as `https://player.example:8443`.
    /// An empty list allows no page at all (requests made by no page still pass).
    package init(parsing list: [String]) throws(WebOriginPolicyError) {
        var entries: [Entry] = []
        for item in list {
            let text = item.trimmingSpaces()
            switch text.lowercased() {
            case "": continue
            case "*": entries.append(.any)
            case "loopback": entries.append(.loopback)
            case "null": entries.append(.opaque)
            default:
                guard let origin = WebOrigin(text) else {
                    throw WebOriginPolicyError(
                        "\(text) is not a web origin: expected scheme://host[:port] (no path), loopback, null or *")
                }
                entries.append(.origin(origin.serialized))
            }
        }
        self.entries = entries
    }

    /// Whether every page is allowed (`*`).
    package var allowsAnyPage: Bool { entries.contains(.any) }

    package var description: String { entries.isEmpty ? "none" : entries.map(\.description).joined(separator: ", ") }

    /// Who is behind a request, as far as the server may act on it.
    package enum Verdict: Sendable, Hashable {
        /// No page: a native client, or a browser navigating by itself (`Sec-Fetch-Site: none`).
        case noPage
        /// A page the policy allows; `origin` is the value of its `Origin` header to echo in
        /// `Access-Control-Allow-Origin` (nil when the request carried none).
        case allowed(origin: String?)
        /// A page the policy does not allow; `page` names it for logs and error bodies.
        case refused(page: String)

        /// Whether the request may have what only allowed clients get (keys, admin data, state changes).
        package var isRefused: Bool {
            if case .refused = self { return true }
            return false
        }
    }

    /// Judges a request by its `Origin`, `Sec-Fetch-Site`, `Referer` and `Host` headers.
    ///
    /// - An `Origin` is allowed when an entry matches it, or when it is the server's own origin as addressed by an IP
    ///   literal or `localhost` (`Host`): a page hlscache itself served (the status page). A name is not enough, since
    ///   a page on a name that rebinds its DNS to this machine would be "same origin" too; proxied content is served
    ///   sandboxed (an opaque origin), so it is never same-origin with the server.
    /// - Without `Origin`, `Sec-Fetch-Site: cross-site` or `same-site` is a page's no-cors request (a `<video>`, an
    ///   `<img>`): the page is the `Referer`'s origin when there is one, else unknown (refused).
    package func judge(origin: String?, fetchSite: String?, referer: String?, host: String?) -> Verdict {
        if let origin {
            let value = origin.trimmingSpaces()
            return allows(originValue: value, host: host) ? .allowed(origin: value) : .refused(page: Self.printable(value))
        }
        switch fetchSite?.trimmingSpaces().lowercased() {
        case "cross-site", "same-site":
            guard let referer, let page = WebOrigin(referer, allowingPath: true) else {
                return allowsAnyPage ? .allowed(origin: nil) : .refused(page: "a cross-site page that sent no Origin or Referer")
            }
            return allows(originValue: page.serialized, host: host) ? .allowed(origin: nil) : .refused(page: page.serialized)
        case "same-origin":
            return .allowed(origin: nil)
        default:
            return .noPage
        }
    }

    private func allows(originValue: String, host: String?) -> Bool {
        if allowsAnyPage { return true }
        if originValue.lowercased() == "null" { return entries.contains(.opaque) }
        guard let page = WebOrigin(originValue) else { return false }
        for entry in entries {
            switch entry {
            case .any: return true
            case .opaque: continue
            case .loopback: if page.isLoopback { return true }
            case .origin(let allowed): if allowed == page.serialized { return true }
            }
        }
        if let host, let own = WebOrigin.hostAuthority(host), own.isLiteralOrLocalhost, page.scheme == "http" || page.scheme == "https",
            page.authority == own.authority(defaultPortOf: page.scheme)
        {
            return true
        }
        return false
    }

    /// Whether a `Host` header names this server by an IP literal or `localhost`/`*.localhost` (with or without a
    /// port): names a DNS rebinding cannot take over.
    package static func isLiteralOrLocalhost(hostHeader: String) -> Bool {
        WebOrigin.hostAuthority(hostHeader)?.isLiteralOrLocalhost ?? false
    }

    /// At most 200 printable ASCII characters of a header value, for logs and messages.
    static func printable(_ value: String) -> String {
        String(String.UnicodeScalarView(value.unicodeScalars.prefix(200).map { (0x20..<0x7F).contains($0.value) ? $0 : "?" }))
    }
}

/// A setting value that is not a list of web origins.
package struct WebOriginPolicyError: Error, Sendable, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// A web origin (RFC 6454): scheme, host and port, serialised as `scheme://host[:port]` with the default port left out.
struct WebOrigin: Hashable, Sendable {
    let scheme: String
    /// Lowercased; IPv6 literals keep their brackets.
    let host: String
    let port: Int?

    /// Parses an `Origin` value, or with `allowingPath` a whole URL (a `Referer`), keeping only its origin.
    init?(_ text: String, allowingPath: Bool = false) {
        let text = text.trimmingSpaces()
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return nil }
        let scheme = text[..<colon].lowercased()
        guard !scheme.isEmpty, scheme.utf8.allSatisfy(WebOrigin.isSchemeCharacter) else { return nil }
        var rest = text[text.index(colon, offsetBy: 3)...]
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            guard allowingPath || (rest[end...] == "/" && rest[end] == "/") else { return nil }
            rest = rest[..<end]
        }
        guard !rest.contains("@"), let authority = WebOrigin.hostAuthority(String(rest)) else { return nil }
        self.scheme = scheme
        self.host = authority.host
        let defaultPort = scheme == "https" ? 443 : scheme == "http" ? 80 : nil
        self.port = authority.port == defaultPort ? nil : authority.port
    }

    /// Lowercase letters, digits, `+`, `-` and `.` (RFC 3986 §3.1, after lowercasing).
    static func isSchemeCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "-"),
            UInt8(ascii: "."):
            true
        default: false
        }
    }

    /// Lowercase letters, digits, `-`, `.` and `_`: what a host name may hold here.
    static func isHostCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "_"):
            true
        default: false
        }
    }

    var serialized: String { "\(scheme)://\(authority)" }
    var authority: String { port.map { "\(host):\($0)" } ?? host }

    /// Pages from `localhost`, `*.localhost`, `127.0.0.0/8` and `[::1]`.
    var isLoopback: Bool { HostAuthority(host: host, port: port).isLoopback }

    /// `host[:port]` of a `Host` header or an origin, lowercased; nil when it is not one.
    static func hostAuthority(_ text: String) -> HostAuthority? {
        var host = Substring(text.lowercased())
        var port: Int?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let value = Int(after.dropFirst()), (0...65535).contains(value) else { return nil }
                port = value
            }
            host = host[...close]
            guard host.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
        } else {
            if let colon = host.lastIndex(of: ":") {
                guard let value = Int(host[host.index(after: colon)...]), (0...65535).contains(value) else { return nil }
                port = value
                host = host[..<colon]
            }
            guard host.utf8.allSatisfy(WebOrigin.isHostCharacter) else { return nil }
        }
        guard !host.isEmpty else { return nil }
        return HostAuthority(host: String(host), port: port)
    }
}

/// A host and optional port, as in `Host` or an origin.
struct HostAuthority: Hashable, Sendable {
    let host: String
    let port: Int?

    /// `localhost`, `*.localhost` (RFC 6761), `127.0.0.0/8`, `[::1]` (and `[0:…:1]` spelt out).
    var isLoopback: Bool {
        var name = Substring(host)
        if name.hasSuffix(".") { name = name.dropLast() }
        if name == "localhost" || name.hasSuffix(".localhost") { return true }
        if name == "[::1]" || name == "[0:0:0:0:0:0:0:1]" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { UInt8($0) != nil } && parts[0] == "127"
    }

    /// An IPv4 or IPv6 literal, or `localhost`/`*.localhost`: names a DNS rebinding cannot take over.
    var isLiteralOrLocalhost: Bool {
        if host.hasPrefix("[") { return true }
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { UInt8($0) != nil }
    }

    /// `host[:port]` with the port given explicitly unless it is the scheme's default.
    func authority(defaultPortOf scheme: String) -> String {
        let defaultPort = scheme == "https" ? 443 : 80
        guard let port, port != defaultPort else { return host }
        return "\(host):\(port)"
    }
}

extension StringProtocol {
    fileprivate func trimmingSpaces() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
