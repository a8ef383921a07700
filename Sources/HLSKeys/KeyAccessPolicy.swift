import HLSOrigin

/// Who may receive keys from `/keys/` (docs/design.md §7): loopback clients always, others only inside a configured
/// network (`keys.allow`, `serve --keys-allow CIDR`). A key is the whole protection of a stream, so a proxy
/// listening on `0.0.0.0` for a LAN still keeps keys to the box unless told otherwise.
package struct KeyAccessPolicy: Sendable, Hashable {
    /// Networks allowed besides loopback.
    package var allowedNetworks: [IPNetwork]

    /// A policy allowing loopback and `allowedNetworks`.
    package init(allowedNetworks: [IPNetwork] = []) {
        self.allowedNetworks = allowedNetworks
    }

    /// Whether a client at `peer` (a numeric address, as `SocketAddress.ipAddress` gives it) may receive keys.
    /// Unknown peers (no address, a Unix socket) are refused.
    package func allows(peer: String?) -> Bool {
        guard let peer, let address = OriginIPAddress(peer) else { return false }
        if address.kind == .loopback { return true }
        return allowedNetworks.contains { $0.contains(address) }
    }
}
