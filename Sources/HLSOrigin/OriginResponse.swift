import NIOCore
import NIOHTTP1

/// A whole origin response, for small bodies (playlists, keys) read by `OriginClient.fetch`.
public struct OriginResponse: Sendable {
    /// The head, including the final URL after redirects.
    public var head: OriginResponseHead
    /// The complete body.
    public var body: ByteBuffer

    /// The status code.
    public var status: Int { head.status }
    /// The response headers.
    public var headers: HTTPHeaders { head.headers }

    /// Creates a response.
    public init(head: OriginResponseHead, body: ByteBuffer) {
        self.head = head
        self.body = body
    }
}
