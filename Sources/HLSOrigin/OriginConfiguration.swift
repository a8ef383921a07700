import AsyncHTTPClient
import HLSCacheCore
import NIOCore

/// Settings of an `OriginClient`. The defaults suit a local HLS cache: fail fast on a dead origin, tolerate
/// a slow one, follow a few redirects, retry transient failures twice.
package struct OriginConfiguration: Sendable {
    /// A header or cookie as a name and a value.
    package typealias Field = (name: String, value: String)

    /// How long establishing a connection (TCP, and TLS for https) may take.
    package var connectTimeout: TimeAmount = .seconds(10)
    /// The longest silence between two reads of the response. The clock also runs while a stream handler
    /// holds back the next chunk, so handler futures must complete well within it.
    package var readTimeout: TimeAmount = .seconds(30)
    /// Requests in flight to one origin host (`scheme://host:port`) at once, which is also the number of HTTP/1.1
    /// connections kept to it. AsyncHTTPClient's default of 8 let eight slow transfers from one CDN host stall
    /// every other request for it; a few players reading ahead, and the background downloads, need more.
    package var maxConnectionsPerHost: Int = 64
    /// How long a request waits for one of those to come free before failing with ``OriginError/busy`` (503).
    package var connectionWaitTimeout: TimeAmount = .seconds(30)
    /// Redirects followed per request (301, 302, 303, 307, 308); more is `OriginError.tooManyRedirects`.
    package var maxRedirects: Int = 5
    /// Retries of failures before the response head.
    package var retry: OriginRetryPolicy = OriginRetryPolicy()
    /// An upstream HTTP proxy every request goes through. With a proxy, a host the local resolver cannot
    /// resolve is left to the proxy; addresses it does resolve to are still checked.
    package var proxy: HTTPClient.Configuration.Proxy?
    /// Extra request headers per origin, keyed by lowercased `host` or `host:port` (the latter wins),
    /// for tokens and referers an origin requires. Sent on every hop whose host matches.
    package var originHeaders: [String: [Field]] = [:]
    /// Cookies per origin, keyed like `originHeaders`, sent as one `Cookie` header.
    package var originCookies: [String: [Field]] = [:]
    /// Which destinations may be contacted.
    package var destinationPolicy: OriginDestinationPolicy = OriginDestinationPolicy()
    /// Resolves host names for the destination policy.
    package var resolver: any OriginHostResolver = SystemHostResolver()
    /// How long a host's resolved addresses are reused by the destination check (they are checked against the
    /// policy on every request all the same). Without it every segment request was a DNS lookup; zero turns it off.
    package var resolutionTTL: Duration = .seconds(10)
    /// A PEM file of certificate authorities trusted for `https` origins besides the system's trust store (a private
    /// CDN, a TLS-inspecting corporate proxy). `nil`: the system's only.
    package var extraTrustRootsFile: String?
    /// Whether cookies an origin sets (`Set-Cookie`) are kept and sent back to it, as a player's HTTP stack does
    /// (``OriginCookieJar``).
    package var keepsCookies = true
    /// How long a page's cookie refresh counts as fresh: requests refused meanwhile try again with the cookies it got,
    /// without fetching the page again.
    package var cookieRefreshInterval = Duration.seconds(10)
    /// The `User-Agent` sent unless a request or an origin's headers set one.
    package var userAgent: String = HLSCacheVersion.userAgent

    /// The defaults described on each property.
    package init() {}

    /// The extra headers and cookies for one URL, as header fields.
    func extraHeaders(for url: OriginURL) -> [Field] {
        Self.extraHeaders(for: url, headers: originHeaders, cookies: originCookies)
    }

    /// The extra headers and cookies for one URL from per-origin `headers` and `cookies` (keyed like ``originHeaders``).
    static func extraHeaders(for url: OriginURL, headers originHeaders: [String: [Field]], cookies originCookies: [String: [Field]])
        -> [Field]
    {
        let keys = [url.authority.lowercased(), url.host.lowercased()]
        var fields: [Field] = []
        if let headers = keys.lazy.compactMap({ originHeaders[$0] }).first { fields += headers }
        if let cookies = keys.lazy.compactMap({ originCookies[$0] }).first, !cookies.isEmpty {
            fields.append(("Cookie", cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")))
        }
        return fields
    }
}
