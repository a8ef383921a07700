/// Which origins the client may connect to (server-side request forgery protection). A proxy that fetches any
/// URL a player asks for must not become a way into the cloud metadata service or the host's link-local
/// neighbours. Applied to the first URL and to every redirect hop, on the addresses the host resolves to.
package struct OriginDestinationPolicy: Sendable {
    /// Host names the client may contact; `nil` allows any host. `example.com` matches that host only,
    /// `.example.com` or `*.example.com` its subdomains (not the apex). Compared case-insensitively.
    package var allowedHosts: [String]?
    /// 127.0.0.0/8 and ::1. Allowed by default: local origins and tests live there.
    package var allowLoopback: Bool = true
    /// RFC 1918, carrier-grade NAT (100.64/10) and unique-local IPv6 (fc00::/7). Allowed by default: a home
    /// or office origin (NAS, encoder) is a normal use of a local cache.
    package var allowPrivateNetworks: Bool = true
    /// 169.254.0.0/16 and fe80::/10. Refused by default.
    package var allowLinkLocal: Bool = false
    /// 169.254.169.254, fd00:ec2::254 and 100.100.100.200 (instance metadata). Refused by default, and not
    /// allowed by `allowLinkLocal` or `allowPrivateNetworks`: only this flag opens them.
    package var allowCloudMetadata: Bool = false

    /// The default policy: any host, loopback and private networks allowed, link-local and metadata refused.
    package init(
        allowedHosts: [String]? = nil,
        allowLoopback: Bool = true,
        allowPrivateNetworks: Bool = true,
        allowLinkLocal: Bool = false,
        allowCloudMetadata: Bool = false
    ) {
        self.allowedHosts = allowedHosts
        self.allowLoopback = allowLoopback
        self.allowPrivateNetworks = allowPrivateNetworks
        self.allowLinkLocal = allowLinkLocal
        self.allowCloudMetadata = allowCloudMetadata
    }

    /// Whether the host name passes `allowedHosts` (no resolution).
    package func allowsHost(_ host: String) -> Bool {
        guard let allowedHosts else { return true }
        let host = host.lowercased()
        for entry in allowedHosts {
            let entry = entry.lowercased()
            if entry.hasPrefix("*.") || entry.hasPrefix(".") {
                let suffix = entry.hasPrefix("*.") ? String(entry.dropFirst()) : entry
                if host.hasSuffix(suffix) && host.count > suffix.count { return true }
            } else if host == entry {
                return true
            }
        }
        return false
    }

    /// Whether a connection to this address is allowed.
    package func allowsAddress(_ address: OriginIPAddress) -> Bool {
        switch address.kind {
        case .global: true
        case .loopback: allowLoopback
        case .privateNetwork: allowPrivateNetworks
        case .linkLocal: allowLinkLocal
        case .cloudMetadata: allowCloudMetadata
        case .unroutable: false
        }
    }
}
