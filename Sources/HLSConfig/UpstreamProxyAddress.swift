import Foundation

/// `origin.proxy`: an upstream proxy, written `[http://][USER:PASSWORD@]HOST:PORT[/]` (an HTTP proxy) or
/// `socks5://HOST:PORT` (`socks5h://` alike).
///
/// HTTP: AsyncHTTPClient opens a `CONNECT` tunnel over plain TCP, and the origin's TLS (for https origins) runs end
/// to end inside it; the user and password are percent-decoded (`p%40ss` is `p@ss`), as in a URL, and sent as
/// `Basic` `Proxy-Authorization` on each tunnel. SOCKS5: the origin's name goes to the proxy, which resolves it
/// (what curl calls `socks5h`), and there is no authentication (AsyncHTTPClient has none for SOCKS).
package struct UpstreamProxyAddress: Equatable, Sendable {
    package enum Kind: Sendable { case http, socks5 }

    package var kind: Kind = .http
    package var host: String
    package var port: Int
    package var username: String?
    package var password: String?

    package init(_ kind: Kind = .http, host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }

    static let usage = "expected [http://][USER:PASSWORD@]HOST:PORT or socks5://HOST:PORT"

    package init(parsing text: String) throws(SettingProblem) {
        guard !text.unicodeScalars.contains(where: { $0.value <= 32 || $0.value == 127 }) else {
            throw SettingProblem("\(Self.usage), without spaces or control characters")
        }
        var rest = Substring(text)
        if let scheme = rest.range(of: "://") {
            let name = rest[..<scheme.lowerBound].lowercased()
            switch name {
            case "http": kind = .http
            case "socks5", "socks5h": kind = .socks5
            default: throw SettingProblem("\(name):// proxies are not supported; \(Self.usage)")
            }
            rest = rest[scheme.upperBound...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if let at = rest.lastIndex(of: "@") {
            guard kind == .http else { throw SettingProblem("a SOCKS proxy takes no user or password here (no SOCKS authentication)") }
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let colon = userInfo.firstIndex(of: ":")
            let user = colon.map { userInfo[..<$0] } ?? userInfo
            let password = colon.map { userInfo[userInfo.index(after: $0)...] } ?? ""
            guard let user = String(user).removingPercentEncoding, let password = String(password).removingPercentEncoding else {
                throw SettingProblem("a bad %-escape in the proxy's user or password")
            }
            guard !user.isEmpty else { throw SettingProblem("an empty proxy user; \(Self.usage)") }
            guard !user.contains(":") else { throw SettingProblem("a proxy user cannot contain ':' (%3A in a password is fine)") }
            username = user
            self.password = password
        }
        guard let (host, port) = Self.hostPort(rest), !host.contains("/") else { throw SettingProblem(Self.usage) }
        self.host = host
        self.port = port
    }

    /// `host:port` (`[v6]:port` too) → its parts; nil when malformed. (Not ``ListenAddress``: a proxy needs a
    /// host and a port from 1 up.)
    private static func hostPort(_ text: Substring) -> (String, Int)? {
        guard let colon = text.lastIndex(of: ":"), colon > text.startIndex, let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }

    /// `text` as `--print-config` and error messages show it: the password (or, without one, the user, which
    /// some proxies take as the secret) replaced by `********`.
    package static func masked(_ text: String) -> String {
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        guard let at = text[start...].lastIndex(of: "@") else { return text }
        let userInfo = text[start..<at]
        let shown = userInfo.firstIndex(of: ":").map { "\(userInfo[..<$0]):********" } ?? "********"
        return text[..<start] + shown + text[at...]
    }
}
