import HLSPlaylist

/// Rewrites playlist URIs to the proxy's URL space (DESIGN.md §3): `https://host/p?q` → `/https/host/p?q`.
/// URLs that cannot be proxied (bad host, unsupported scheme) are left as written.
///
/// Keys are not mapped here (`mapsKeys` false): with the key store they go to `/keys/{id}`, decided by the
/// caller, so the directory fast path is never offered for key roles.
public struct ProxyPathRewriter: URIRewriter {
    /// Called for key and session-key URIs; nil keeps the generic proxy path.
    public var keyRewrite: (@Sendable (_ resolvedURL: String, _ role: URIRole) throws -> String?)?

    public init(keyRewrite: (@Sendable (_ resolvedURL: String, _ role: URIRole) throws -> String?)? = nil) {
        self.keyRewrite = keyRewrite
    }

    public func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? {
        if let keyRewrite, role == .key || role == .sessionKey { return try keyRewrite(resolvedURL, role) }
        return try? OriginURL(resolvedURL).proxyPath
    }

    public func directoryPrefix(for directoryURL: String, role: URIRole) -> String? {
        guard role != .key && role != .sessionKey else { return nil }
        guard let path = try? OriginURL(directoryURL).proxyPath, path.hasSuffix("/") else { return nil }
        return path
    }
}
