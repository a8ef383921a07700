import Foundation
import HLSCacheCore

/// The cookies origins set, sent back on later requests as a browser would (RFC 6265 §5.2–5.4, without the
/// public-suffix list).
///
/// Some CDNs hand out their access token as a cookie on the multivariant playlist and refuse every later request
/// without it (Akamai's `hdntl` token, signed CloudFront cookies set by a redirect): a player's own HTTP stack keeps
/// it, so hlscache, fetching for the player, must too. Kept in memory for the life of the process; cookies
/// configured for an origin (`origins.HOST.cookies`) and a request's own `Cookie` header take precedence over
/// stored ones of the same name. A value: the client keeps its jar under its own lock (``OriginClient``).
package struct OriginCookieJar: Sendable {
    struct Cookie: Equatable, Sendable {
        var name: String
        var value: String
        /// Lower-case host or domain, without a leading dot.
        var domain: String
        /// Sent to `domain` only, not to its subdomains (no `Domain` attribute).
        var hostOnly: Bool
        var path: String
        var secure: Bool
        /// `nil`: until the process ends.
        var expires: Date?
    }

    /// RFC 6265 §6.1's minimums, as limits.
    static let maxCookieBytes = 4096
    static let maxPerDomain = 50
    static let maxCookies = 3000

    private var jar: [Cookie] = []

    package init() {}

    /// Stores the cookies of `setCookie` (the values of a response's `Set-Cookie` headers) received from `url`.
    package mutating func store(_ setCookie: [String], from url: OriginURL, now: Date = Date()) {
        let parsed = setCookie.compactMap { Self.parse($0, from: url, now: now) }
        guard !parsed.isEmpty else { return }
        jar.removeAll { $0.expires.map { $0 <= now } ?? false }
        for cookie in parsed {
            jar.removeAll { $0.name == cookie.name && $0.domain == cookie.domain && $0.path == cookie.path }
            // An expiry in the past deletes (RFC 6265 §5.3 step 11): nothing is added.
            if let expires = cookie.expires, expires <= now { continue }
            if cookie.secure && url.scheme != "https" { continue }
            jar.append(cookie)
            let sameDomain = jar.indices.filter { jar[$0].domain == cookie.domain }
            if sameDomain.count > Self.maxPerDomain { jar.remove(at: sameDomain[0]) }
            if jar.count > Self.maxCookies { jar.removeFirst(jar.count - Self.maxCookies) }
        }
    }

    /// The cookies to send to `url`, longest path first, leaving out `taken` names.
    package func cookies(for url: OriginURL, excluding taken: Set<String> = [], now: Date = Date()) -> [(name: String, value: String)] {
        let host = Self.bareHost(url)
        let path = url.path.isEmpty ? "/" : url.path
        let matching = jar.filter { cookie in
            if let expires = cookie.expires, expires <= now { return false }
            if cookie.secure && url.scheme != "https" { return false }
            guard cookie.hostOnly ? host == cookie.domain : Self.domainMatches(host, cookie.domain) else { return false }
            return Self.pathMatches(path, cookie.path) && !taken.contains(cookie.name)
        }
        return matching.sorted { $0.path.count > $1.path.count }.map { ($0.name, $0.value) }
    }

    /// How many cookies are held.
    package var count: Int { jar.count }

    // MARK: - RFC 6265 §5.2

    static func parse(_ header: String, from url: OriginURL, now: Date) -> Cookie? {
        guard header.utf8.count <= maxCookieBytes else { return nil }
        var parts = header.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let pair = parts.removeFirst()
        guard let equals = pair.firstIndex(of: "=") else { return nil }
        let name = pair[..<equals].trimmingCharacters(in: .whitespaces)
        let value = pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, !name.contains(where: { $0 == " " || $0 == "," || $0 == "\t" }) else { return nil }
        let host = bareHost(url)
        var cookie = Cookie(
            name: name, value: value, domain: host, hostOnly: true, path: defaultPath(url.path), secure: false, expires: nil)
        var maxAge: Int?
        for attribute in parts {
            let (key, argument): (String, String) =
                if let split = attribute.firstIndex(of: "=") {
                    (
                        attribute[..<split].trimmingCharacters(in: .whitespaces).lowercased(),
                        attribute[attribute.index(after: split)...].trimmingCharacters(in: .whitespaces)
                    )
                } else {
                    (attribute.lowercased(), "")
                }
            switch key {
            case "domain":
                var domain = argument.lowercased()
                if domain.hasPrefix(".") { domain.removeFirst() }
                guard !domain.isEmpty else { continue }
                // Only the host itself or a domain it belongs to, never a bare top-level name or another host.
                guard domainMatches(host, domain) else { return nil }
                if domain != host {
                    guard domain.contains("."), !isIPAddress(host) else { return nil }
                    cookie.hostOnly = false
                }
                cookie.domain = domain
            case "path":
                if argument.hasPrefix("/") { cookie.path = argument }
            case "secure":
                cookie.secure = true
            case "max-age":
                if let seconds = Int(argument) { maxAge = seconds }
            case "expires":
                // IMF-fixdate, or the older "Wdy, DD-Mon-YYYY HH:MM:SS GMT"; anything else is ignored (§5.2.1).
                if let seconds = HTTPDate.parse(argument.replacingOccurrences(of: "-", with: " ")) {
                    cookie.expires = Date(timeIntervalSince1970: TimeInterval(seconds))
                }
            default:
                break  // HttpOnly, SameSite, Priority, Partitioned: not for a server-side client
            }
        }
        if let maxAge { cookie.expires = maxAge <= 0 ? Date.distantPast : now.addingTimeInterval(TimeInterval(maxAge)) }
        return cookie
    }

    static func bareHost(_ url: OriginURL) -> String {
        let host = url.host.lowercased()
        return host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    static func isIPAddress(_ host: String) -> Bool {
        host.contains(":") || host.split(separator: ".").allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
    }

    /// §5.1.3: `host` is `domain` or ends in "." + `domain`, and is not an IP address.
    static func domainMatches(_ host: String, _ domain: String) -> Bool {
        host == domain || (host.hasSuffix("." + domain) && !isIPAddress(host))
    }

    /// §5.1.4: the directory of the request path.
    static func defaultPath(_ path: String) -> String {
        guard path.hasPrefix("/"), let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// §5.1.4: `path` is `cookiePath`, or below it.
    static func pathMatches(_ path: String, _ cookiePath: String) -> Bool {
        if path == cookiePath { return true }
        guard path.hasPrefix(cookiePath) else { return false }
        return cookiePath.hasSuffix("/") || path.dropFirst(cookiePath.count).first == "/"
    }
}
