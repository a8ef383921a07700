import HLSPlaylist

/// Rewrites playlist URIs to the proxy's URL space (docs/design.md §3): `https://host/p?q` → `/https/host/p?q`.
/// URLs that cannot be proxied (bad host, unsupported scheme) are left as written.
///
/// Keys are not mapped here (`mapsKeys` false): with the key store they go to `/keys/{id}`, decided by the
/// caller, so the directory fast path is never offered for key roles.
package struct ProxyPathRewriter: URIRewriter {
    /// Called for key and session-key URIs with the key's `METHOD` as written (empty when unknown); nil keeps the
    /// generic proxy path.
    package var keyRewrite: ((_ resolvedURL: String, _ role: URIRole, _ method: String) throws -> String?)?

    package init(keyRewrite: ((_ resolvedURL: String, _ role: URIRole, _ method: String) throws -> String?)? = nil) {
        self.keyRewrite = keyRewrite
    }

    package func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? {
        if let keyRewrite, role == .key || role == .sessionKey { return try keyRewrite(resolvedURL, role, "") }
        return try? OriginURL(resolvedURL).proxyPath
    }

    package func rewriteKey(_ resolvedURL: String, role: URIRole, method: String) throws -> String? {
        if let keyRewrite { return try keyRewrite(resolvedURL, role, method) }
        return try? OriginURL(resolvedURL).proxyPath
    }

    package func directoryPrefix(for directoryURL: String, role: URIRole) -> String? {
        guard role != .key && role != .sessionKey else { return nil }
        guard let path = try? OriginURL(directoryURL).proxyPath, path.hasSuffix("/") else { return nil }
        return path
    }
}

/// The inverse of ``ProxyPathRewriter`` for a playlist as another hlscache served it (a fleet's balancer, for
/// `hlscache fetch --through`): every URI that resolves to a proxy path on `server` (`/https/cdn…/seg.ts`, a key's
/// `/keys/{id}/https/cdn…/k.key`) becomes the origin URL again; anything else is kept as written.
package struct ServedPathRewriter: URIRewriter {
    /// The serving hlscache, `scheme://authority` (no path).
    package let server: String

    package init(server: String) {
        var server = server
        while server.hasSuffix("/") { server.removeLast() }
        self.server = server
    }

    package func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? {
        guard resolvedURL.hasPrefix(server + "/") else { return nil }
        var path = Substring(resolvedURL.dropFirst(server.count))
        if path.hasPrefix("/keys/") {
            // `/keys/{32 hex}/scheme/authority/…`: the key URL after the id.
            let afterKeys = path.dropFirst("/keys/".count)
            guard let slash = afterKeys.firstIndex(of: "/") else { return nil }
            path = afterKeys[slash...]
        }
        return try? OriginURL(proxyTarget: String(path)).string
    }
}
