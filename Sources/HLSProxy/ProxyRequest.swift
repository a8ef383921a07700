import HLSCacheCore
import NIOCore
import NIOHTTP1

/// A complete client request as the router sees it.
package struct ProxyRequest: Sendable {
    package var head: HTTPRequestHead
    package var remoteAddress: SocketAddress?
    /// The address the connection was accepted on (the base of absolute URLs, ``ServerBaseURL``).
    package var localAddress: SocketAddress? = nil
    /// The request body, at most `maxRequestBodyBytes` (64 KiB); `nil` when the request had none.
    package var body: ByteBuffer? = nil
    /// The web page behind the request, as `http.allowedWebOrigins` judges it (set when the request is dispatched).
    package var page: WebOriginPolicy.Verdict = .noPage

    package init(
        head: HTTPRequestHead, remoteAddress: SocketAddress? = nil, localAddress: SocketAddress? = nil, body: ByteBuffer? = nil,
        page: WebOriginPolicy.Verdict = .noPage
    ) {
        self.head = head
        self.remoteAddress = remoteAddress
        self.localAddress = localAddress
        self.body = body
        self.page = page
    }

    package var method: HTTPMethod { head.method }
    /// By case: `==` on methods compared their names as strings, and a hit asks this several times.
    package var isHead: Bool {
        switch head.method {
        case .HEAD: return true
        case .RAW(let value): return value == "HEAD"
        default: return false
        }
    }
    /// Whether the method is GET, by case as ``isHead``.
    package var isGet: Bool {
        switch head.method {
        case .GET: return true
        case .RAW(let value): return value == "GET"
        default: return false
        }
    }
    package var headers: HTTPHeaders { head.headers }

    package func header(_ name: String) -> String? { head.headers.first(name: name) }

    /// `http://authority` this request reached the server at, as `names` judges its `Host` (``ServerBaseURL``); nil
    /// when the connection's local address is unknown.
    func serverBase(_ names: ServerBaseURL) -> String? {
        names.base(hostHeader: header("Host"), localIP: localAddress?.ipAddress, localPort: localAddress?.port)
    }

    /// The verdict of `policy` on the page behind this request (`Origin`, `Sec-Fetch-Site`, `Referer`, `Host`).
    func judgedPage(by policy: WebOriginPolicy) -> WebOriginPolicy.Verdict {
        let origin = header("Origin")
        let fetchSite = header("Sec-Fetch-Site")
        guard origin != nil || fetchSite != nil else { return .noPage }
        return policy.judge(origin: origin, fetchSite: fetchSite, referer: header("Referer"), host: header("Host"))
    }

    /// Whether the request asks for the whole current representation, unconditionally: no `Range` and no `If-…`
    /// precondition (`If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`, `If-Range`): the
    /// requests a replayed hit may answer.
    package var isPlainFetch: Bool {
        for (name, _) in head.headers {
            guard let first = name.utf8.first, first | 0x20 == UInt8(ascii: "r") || first | 0x20 == UInt8(ascii: "i") else { continue }
            if ResponseEncoding.equalsIgnoringCase(name, "range") { return false }
            let bytes = name.utf8
            if bytes.count > 3, bytes.starts(with: [UInt8(ascii: "i"), UInt8(ascii: "f"), UInt8(ascii: "-")], by: { $0 | 0x20 == $1 }) {
                return false
            }
        }
        return true
    }

    /// The same request without `Range` / `If-Range` (for answering a whole representation instead).
    package var withoutRange: ProxyRequest {
        var copy = self
        copy.head.headers.remove(name: "Range")
        copy.head.headers.remove(name: "If-Range")
        return copy
    }

    /// Whether the client accepts a gzip body (`Accept-Encoding: gzip`, not `gzip;q=0`).
    package var acceptsGzip: Bool {
        for value in head.headers[canonicalForm: "accept-encoding"] {
            let parts = value.split(separator: ";").map { $0.trimmingSpaces() }
            guard let coding = parts.first?.lowercased(), coding == "gzip" || coding == "*" else { continue }
            if parts.dropFirst().contains(where: { $0.replacingSpaces() == "q=0" || $0.replacingSpaces() == "q=0.0" }) { return false }
            return true
        }
        return false
    }
}

extension Substring {
    fileprivate func replacingSpaces() -> String { String(filter { $0 != " " }) }
}
