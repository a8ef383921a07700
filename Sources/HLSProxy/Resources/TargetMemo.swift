import HLSCacheCore
import HLSCacheStore
import NIOCore
import NIOHTTP1

/// What ``ResourceService`` remembers about a proxied request target. Copied out of the memo on every request,
/// so it is two references.
struct TargetMemo: Sendable {
    let resolved: ResolvedTarget
    /// The last whole-object hit served for it.
    var replay: HitReplay?
    /// The last whole stored playlist served for it (a playlist's target never has a ``replay``).
    var playlistReplay: PlaylistReplay?

    var url: OriginURL { resolved.url }
    var key: CacheKey { resolved.key }
    var blocking: Bool { resolved.blocking }
}

/// A request target parsed once: its origin URL and cache key.
final class ResolvedTarget: Sendable {
    let url: OriginURL
    let key: CacheKey
    /// Carries LL-HLS blocking-reload parameters: always fetched from the origin.
    let blocking: Bool
    /// The volatile query parameters (tokens) of the URL (``CacheKey/volatileSignature(_:volatileParameters:)``).
    let tokens: String

    init(url: OriginURL, key: CacheKey, blocking: Bool, tokens: String) {
        self.url = url
        self.key = key
        self.blocking = blocking
        self.tokens = tokens
    }
}

/// The 200 response head of a cached object exactly as ``ProxyHTTPHandler`` writes it on a kept-alive
/// HTTP/1.1 connection, rendered once: the next plain GET or HEAD of the same object sends these bytes and the
/// file, without building headers again. The head stops before its `Date` line, which the handler adds (with the
/// blank line) from its event loop's ``DateLine``.
final class HitReplay: Sendable {
    let object: CachedObject
    /// The headers, CORS included (what the route observer is shown).
    let headers: HTTPHeaders
    let head: ByteBuffer

    init(object: CachedObject, headers: HTTPHeaders) {
        self.object = object
        self.headers = headers
        var head = ByteBuffer()
        head.reserveCapacity(512)
        _ = ResponseEncoding.writeHead(
            status: .ok, headers: headers, bodyLength: object.size, chunkedAllowed: true, headOnly: false, connection: nil,
            terminated: false,
            into: &head)
        self.head = head
    }
}
