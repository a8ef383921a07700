import Foundation
import HLSCacheCore
import HLSKeys
import HLSProxy
import NIOCore
import NIOHTTP1

/// Who may use the API: loopback peers and `api.allow` networks (else 403), from no web page or one
/// `http.allowedWebOrigins` allows (else 403), carrying the bearer token when one is configured (else 401). Without a
/// token the request's `Host` must be an IP literal or `localhost`, so a web page on another name that rebinds its
/// DNS to 127.0.0.1 cannot drive the API from a browser.
struct AdminAccess: Sendable {
    let policy: KeyAccessPolicy
    let token: [UInt8]?

    init(configuration: AdminConfiguration) {
        policy = KeyAccessPolicy(allowedNetworks: configuration.allowedNetworks)
        token = configuration.token.map { Array($0.utf8) }
    }

    /// `nil` when the request may proceed. `queryToken` is the `access_token` query parameter, accepted only where
    /// a browser cannot send headers (`EventSource` on `/events`).
    func check(_ request: ProxyRequest, queryToken: String?, needsToken: Bool = true) -> AdminError? {
        // A browser on this machine is a loopback peer whatever page it shows: the page must be one
        // http.allowedWebOrigins allows (or none, as for curl and scripts).
        if case .refused(let page) = request.page {
            return .forbidden("a web page from \(page) may not use the admin API (http.allowedWebOrigins)")
        }
        guard policy.allows(peer: request.remoteAddress?.ipAddress) else {
            return .forbidden("the admin API answers loopback clients and api.allow networks only")
        }
        guard let token else {
            if let host = request.header("host"), !WebOriginPolicy.isLiteralOrLocalhost(hostHeader: host) {
                return .forbidden("without api.token the API answers only requests addressed to an IP or localhost")
            }
            return nil
        }
        guard needsToken else { return nil }
        var presented: String?
        if let authorization = request.header("authorization") {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" { presented = String(parts[1]).trimmingCharacters(in: .whitespaces) }
        } else {
            presented = queryToken
        }
        guard let presented else { return .unauthorized("this API needs a bearer token (Authorization: Bearer …)") }
        guard Self.constantTimeEquals(Array(presented.utf8), token) else { return .unauthorized("wrong bearer token") }
        return nil
    }

    /// Compares without an early exit, so the time taken does not tell how much of the token was right.
    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= x ^ y
        }
        return difference == 0
    }

    /// Requests that change state must say `Content-Type: application/json`, with a body or without: a page can send
    /// `text/plain`, a form or no type at all without asking the server first (no CORS preflight), so this is what
    /// keeps a plain `<form>` on any site from driving the API (CSRF).
    static func refusesUnsafe(_ request: ProxyRequest) -> AdminError? {
        switch request.method {
        case .GET, .HEAD, .OPTIONS: return nil
        default:
            guard !AdminAPI.isJSON(request) else { return nil }
            return .unsupportedMediaType(
                "\(request.method.rawValue) requests to the admin API need Content-Type: application/json (with a body or without)")
        }
    }
}
