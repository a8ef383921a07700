import HLSCacheCore
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// Maps a request target to what answers it (docs/design.md §3): origin resources under `/http/` and `/https/`,
/// the reserved `/healthz`, `/` and, as later modules land, `/api/`, `/keys/`, `/metrics`.
final class ProxyRouter: Sendable {
    let resources: ResourceService
    private let keys: KeyEndpoint
    private let operations: OperationsEndpoint
    private let services: ProxyServices

    init(services: ProxyServices) {
        self.services = services
        self.resources = ResourceService(services: services)
        self.keys = KeyEndpoint(services: services)
        self.operations = OperationsEndpoint(services: services)
    }

    /// Whether the answer to a request for `target` reads the request's body: only the route extension (the
    /// admin API) does, so a body sent anywhere else with `Expect: 100-continue` is not asked for.
    func readsBody(of target: String) -> Bool {
        guard services.routeExtension != nil else { return false }
        let path = target.utf8.firstIndex(of: UInt8(ascii: "?")).map { target[..<$0] } ?? target[...]
        return path == "/" || path == "/api" || path.utf8.starts(with: "/api/".utf8)
    }

    func route(_ request: ProxyRequest, responder: Responder) {
        // The connection asks again: a large body it was sent has been read.
        if let hold = responder.largeSendHold { services.memory.requestBegan(on: hold) }
        // RFC 9110 §9.1: a method the server does not know is 501; the methods of RFC 9110 and PATCH are known, and
        // a path that does not allow one answers 405 with Allow. (Methods llhttp itself does not know never get
        // here: RequestDecoder turns them into a 501 and the connection closes.)
        switch request.method {
        case .GET, .HEAD, .POST, .PUT, .DELETE, .OPTIONS, .TRACE, .PATCH, .CONNECT: break
        default:
            responder.send(error: ProxyError.notImplemented(request.method.rawValue))
            return
        }
        let target = request.head.uri
        guard target.utf8.first == UInt8(ascii: "/") else {
            if request.method == .OPTIONS && target == "*" {
                preflight(request, responder)
            } else {
                responder.send(
                    error: ProxyError.badRequest(
                        "request target must be a path, or an http:// URL naming this server (hlscache is not a forward proxy)"))
            }
            return
        }
        let path = target.utf8.firstIndex(of: UInt8(ascii: "?")).map { target[..<$0] } ?? target[...]
        responder.route = RequestRoute.classify(path: path)
        let isAdmin = services.routeExtension != nil && (path == "/" || path == "/api" || path.utf8.hasPrefix("/api/"))
        if request.method == .OPTIONS {
            preflight(request, responder, admin: isAdmin)
            return
        }
        if let routeExtension = services.routeExtension {
            if isAdmin {
                routeExtension.handle(request, responder: ProxyResponder(responder))
                return
            }
            responder.routeObserver = routeExtension
        }
        // `/rewind/{scheme}/…`: the proxied URL after it, a live media playlist extended backwards (docs/fetch.md#live).
        let rewind = path.utf8.hasPrefix("/rewind/http/") || path.utf8.hasPrefix("/rewind/https/")
        if rewind || path.utf8.hasPrefix("/http/") || path.utf8.hasPrefix("/https/") || path == "/http" || path == "/https" {
            guard request.method == .GET || request.method == .HEAD else {
                responder.send(error: ProxyError.methodNotAllowed(request.method.rawValue), extraHeaders: ["Allow": "GET, HEAD, OPTIONS"])
                return
            }
            // This server's own read-ahead through a fleet's balancer (``ReadAheadThrough``), sent back here because the
            // segment hashes to this node, is answered as any request: it reads nothing ahead, and its origin fetch
            // carries this server's Via without the mark, so a proxied URL naming this server still ends here.
            if let via = request.header("Via"), via.contains(services.origin.instanceToken), !ReadAheadThrough.isReadAhead(request) {
                responder.send(
                    error: ProxyError.loopDetected(
                        "this request came from this server's own origin fetch (Via): a proxied URL names the proxy itself"))
                return
            }
            responder.isProxiedContent = true
            responder.wantsRewind = rewind
            resources.handle(request, target: rewind ? String(target.dropFirst("/rewind".count)) : target, responder: responder)
            return
        }
        if path.utf8.hasPrefix("/keys/") {
            guard request.method == .GET || request.method == .HEAD else {
                responder.send(error: ProxyError.methodNotAllowed(request.method.rawValue), extraHeaders: ["Allow": "GET, HEAD, OPTIONS"])
                return
            }
            keys.handle(request, id: target.dropFirst("/keys/".count), responder: responder)
            return
        }
        switch path {
        case "/healthz":
            sendJSON("{\"status\":\"ok\"}\n", to: responder)
        case "/readyz":
            operations.ready(responder)
        case "/metrics":
            operations.metrics(responder)
        case "/":
            sendStatusPage(to: responder)
        default:
            responder.send(error: ProxyError.notFound("no such path; proxied URLs look like /https/host/path.m3u8"))
        }
    }

    /// The connection closed: a large body it held no longer counts in the memory tier.
    func connectionEnded(_ connection: LargeSendHold) {
        services.memory.connectionEnded(connection)
    }

    /// Request headers a preflight allows when the browser's list is missing or unusable.
    /// Answers a proxied resource's request again as its same bytes were answered before (``ReplayedExchanges``);
    /// false when that answer no longer holds.
    func replay(_ exchange: ReplayedExchange, responder: Responder) -> ReplayedHow? {
        // As in route(_:responder:): the connection asks again.
        if let hold = responder.largeSendHold { services.memory.requestBegan(on: hold) }
        return resources.replay(exchange, responder: responder)
    }

    static let defaultAllowedHeaders = "Range, If-Range, If-None-Match, If-Modified-Since, Origin, Accept, Content-Type"
    /// The longest `Access-Control-Request-Headers` echoed back.
    static let maxRequestedHeadersLength = 1024

    /// A CORS preflight: the methods, the request headers the page asked for (players add their own through hls.js
    /// `xhrSetup` or `fetchSetup`: `Authorization`, `If-Range`, custom tokens), and Chrome's Private Network Access
    /// opt-in.
    ///
    /// Only pages `http.allowedWebOrigins` allows get one: for the others the answer is a 403 without CORS headers,
    /// which the browser reads as a refusal (and Private Network Access is not granted).
    private func preflight(_ request: ProxyRequest, _ responder: Responder, admin: Bool = false) {
        if case .refused(let page) = request.page {
            services.logger.notice("preflight refused", metadata: ["page": "\(page)", "path": "\(request.head.uri.prefix(200))"])
            responder.send(error: ProxyError.pageNotAllowed(page))
            return
        }
        var headers = HTTPHeaders()
        headers.add(name: "Access-Control-Allow-Methods", value: admin ? "GET, HEAD, POST, PATCH, DELETE, OPTIONS" : "GET, HEAD, OPTIONS")
        headers.add(
            name: "Access-Control-Allow-Headers", value: Self.allowedHeaders(requested: request.header("Access-Control-Request-Headers")))
        if request.header("Access-Control-Request-Private-Network")?.trimmingCharacters().lowercased() == "true" {
            headers.add(name: "Access-Control-Allow-Private-Network", value: "true")
        }
        headers.add(name: "Access-Control-Max-Age", value: "86400")
        headers.add(name: "Vary", value: "Access-Control-Request-Headers, Access-Control-Request-Private-Network")
        headers.add(name: "Content-Length", value: "0")
        responder.send(status: .noContent, headers: headers, body: .empty)
    }

    /// `requested` as it came when it is a comma-separated list of header names (RFC 9110 tokens) of at most
    /// ``maxRequestedHeadersLength`` bytes, else ``defaultAllowedHeaders``.
    static func allowedHeaders(requested: String?) -> String {
        guard let requested, requested.utf8.count <= maxRequestedHeadersLength else { return defaultAllowedHeaders }
        let names = requested.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces() }
        guard !names.isEmpty, names.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(isTokenCharacter) }) else {
            return defaultAllowedHeaders
        }
        return names.joined(separator: ", ")
    }

    /// `tchar` (RFC 9110 §5.6.2).
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    private func sendJSON(_ json: String, to responder: Responder) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(json.utf8.count))
        headers.add(name: "Cache-Control", value: "no-store")
        responder.send(status: .ok, headers: headers, body: .bytes(ByteBuffer(string: json)))
    }

    private func sendStatusPage(to responder: Responder) {
        let usage = try? services.store.usage()
        let html = """
            <!doctype html><html><head><meta charset="utf-8"><title>hlscache</title></head><body>
            <h1>hlscache \(HLSCacheVersion.current)</h1>
            <p>Cache: \(usage.map { "\($0.count) objects, \($0.bytes) bytes" } ?? "unavailable") of \(services.configuration.maxCacheBytes) bytes.</p>
            <p>Downloads in flight: \(services.fetches.count).</p>
            <p>Play <code>http://HOST:PORT/https/cdn.example.com/path/master.m3u8</code> to proxy <code>https://cdn.example.com/path/master.m3u8</code>.</p>
            </body></html>

            """
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
        headers.add(name: "Content-Length", value: String(html.utf8.count))
        headers.add(name: "Cache-Control", value: "no-store")
        responder.send(status: .ok, headers: headers, body: .bytes(ByteBuffer(string: html)))
    }
}
