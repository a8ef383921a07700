/// Where a client reached this server, as `http://authority`: the base of the absolute URLs written into the
/// playlists that need them (IPTV channel lists, docs/playlist-engine.md#absolute-urls).
///
/// The request's `Host` is used only when it names this server: an IP literal that is the address the connection was
/// accepted on, `localhost` (or `*.localhost`) on a loopback connection, with the port it was accepted on, or a name
/// listed in `http.serverNames` (`name` for any port, `name:port`). Any other `Host` — a name a DNS rebinding points
/// here, a typo, a forged header — is not written into what is served: the connection's own address is, which reaches
/// the same server. Only the scheme `http` is served.
package struct ServerBaseURL: Sendable, Hashable {
    /// `http.serverNames`, lowercased: `name` or `name:port`.
    package var serverNames: [String]

    package init(serverNames: [String] = []) {
        self.serverNames = serverNames.map { $0.lowercased() }
    }

    /// The base URL for a request with `hostHeader` on a connection accepted at `localIP`:`localPort`; nil when the
    /// local address is unknown.
    package func base(hostHeader: String?, localIP: String?, localPort: Int?) -> String? {
        guard let localIP, let localPort else { return nil }
        let local = Self.unmapped(localIP)
        if let hostHeader, let named = WebOrigin.hostAuthority(hostHeader.trimmingHostSpace()) {
            let port = named.port ?? 80
            let authority = named.port == nil ? named.host : "\(named.host):\(port)"
            if serverNames.contains(authority) || serverNames.contains(named.host) { return "http://" + authority }
            if port == localPort {
                let bare = named.host.hasPrefix("[") ? String(named.host.dropFirst().dropLast()) : named.host
                if Self.unmapped(bare) == local { return "http://" + authority }
                if named.host == "localhost" || named.host.hasSuffix(".localhost"), Self.isLoopback(local) {
                    return "http://" + authority
                }
            }
        }
        return "http://" + ListenAddress(host: local, port: localPort).description
    }

    /// Whether `text` can be an entry of `http.serverNames`: a host name or IP literal, with an optional port.
    package static func isValidName(_ text: String) -> Bool {
        WebOrigin.hostAuthority(text) != nil
    }

    /// `::ffff:127.0.0.1` (an IPv4 client of a dual-stack socket) → `127.0.0.1`; IPv6 lowercased.
    static func unmapped(_ ip: String) -> String {
        let lower = ip.lowercased()
        if lower.hasPrefix("::ffff:"), lower.dropFirst(7).contains(".") { return String(lower.dropFirst(7)) }
        return lower
    }

    static func isLoopback(_ ip: String) -> Bool {
        ip == "::1" || ip.hasPrefix("127.")
    }
}

extension String {
    fileprivate func trimmingHostSpace() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice = slice.dropLast() }
        return String(slice)
    }
}
