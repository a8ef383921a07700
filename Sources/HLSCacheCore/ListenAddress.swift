/// `host:port` as given to `--listen` (`127.0.0.1:8080`, `[::1]:8080`, `0.0.0.0:8080`, `:8080`).
package struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    package var host: String
    package var port: Int

    package init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    package init?(_ text: String) {
        var host: Substring
        var portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        if host.isEmpty { host = "127.0.0.1" }
        guard let port = Int(portText), (0...65535).contains(port) else { return nil }
        self.host = String(host)
        self.port = port
    }

    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The base URL a player on this machine reaches a server listening here at: `http://host:port`, with a
    /// wildcard address (`0.0.0.0`, `::`) given as the loopback address of its family.
    package var localBaseURL: String {
        let reachable =
            switch host {
            case "0.0.0.0", "": "127.0.0.1"
            case "::", "[::]": "::1"
            default: host
            }
        return "http://" + ListenAddress(host: reachable, port: port).description
    }
}

/// Where the cache lives when `--cache-dir` is not given: `$HLSCACHE_CACHE_DIR` (set in the Docker image to
/// `/var/cache/hlscache`), else `$XDG_CACHE_HOME/hlscache`, else `~/.cache/hlscache`.
package enum DefaultCacheDirectory {
    package static func resolve(environment: [String: String]) -> String {
        if let explicit = environment["HLSCACHE_CACHE_DIR"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty { return xdg + "/hlscache" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.cache/hlscache" }
        return "/var/cache/hlscache"
    }
}
