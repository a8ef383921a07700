import NIOCore
import NIOHTTP1

/// RFC 9112 §3.2.2: a server must accept a request target in absolute form (`GET http://host:port/path`), which
/// proxies send and some clients do. hlscache is not a forward proxy: a target naming this server (its port, and
/// `localhost`, the address the connection reached or the configured listen host) is served as the path it names,
/// and the target's authority replaces `Host`, as the RFC asks. Any other absolute target is left as it is, and
/// the router refuses it (400).
enum AbsoluteForm {
    /// `head` with an absolute-form target naming this server rewritten to origin form, or `head` unchanged.
    /// - Parameters:
    ///   - local: the address the connection was accepted on.
    ///   - listenHost: the configured listen host (a name or an address).
    static func originForm(of head: HTTPRequestHead, local: SocketAddress?, listenHost: String) -> HTTPRequestHead {
        guard let (authority, path) = split(head.uri), let local, let localPort = local.port,
            let (host, port) = hostAndPort(authority), port == localPort, names(host, local: local, listenHost: listenHost)
        else { return head }
        var head = head
        head.uri = path
        // The target's authority is the request's host. The number of Host fields is left alone: the state machine
        // refuses an HTTP/1.1 request without one, and any with two.
        let hosts = head.headers[canonicalForm: "host"].count
        if hosts == 1 {
            head.headers.replaceOrAdd(name: "Host", value: String(authority))
        } else if hosts == 0 && head.version.major == 1 && head.version.minor == 0 {
            head.headers.add(name: "Host", value: String(authority))
        }
        return head
    }

    /// `http://AUTHORITY/PATH?QUERY` → (`AUTHORITY`, `/PATH?QUERY`); the path is `/` when the target has none.
    /// Nil for anything else (another scheme, user information, a fragment, no authority).
    static func split(_ target: String) -> (authority: Substring, path: String)? {
        let scheme = "http://"
        guard target.utf8.count > scheme.utf8.count, target.prefix(scheme.count).lowercased() == scheme else { return nil }
        let rest = target.dropFirst(scheme.count)
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<end]
        guard !authority.isEmpty, !authority.contains("@"), !rest.contains("#") else { return nil }
        let path = rest[end...]
        return (authority, path.isEmpty ? "/" : path.hasPrefix("?") ? "/" + path : String(path))
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port` → (host without brackets, lower-cased; port, 80 when absent).
    static func hostAndPort(_ authority: Substring) -> (host: String, port: Int)? {
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            portText = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        var port = 80
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = Int(portText)
            else {
                return nil
            }
            port = value
        }
        guard !host.isEmpty else { return nil }
        return (host.lowercased(), port)
    }

    /// Whether `host` names this server: `localhost`, the address the connection reached, or the listen host.
    static func names(_ host: String, local: SocketAddress, listenHost: String) -> Bool {
        if host == "localhost" { return true }
        if let address = local.ipAddress?.lowercased(), host == address { return true }
        let listen = listenHost.lowercased()
        return host == (listen.hasPrefix("[") && listen.hasSuffix("]") ? String(listen.dropFirst().dropLast()) : listen)
    }
}
