import NIOCore
import NIOHTTP1

/// A whole origin response, for small bodies (playlists, keys) read by `OriginClient.fetch`.
package struct OriginResponse: Sendable {
    /// The head, including the final URL after redirects.
    package var head: OriginResponseHead
    /// The complete body.
    package var body: ByteBuffer

    /// The status code.
    package var status: Int { head.status }
    /// The response headers.
    package var headers: HTTPHeaders { head.headers }

    /// Creates a response.
    package init(head: OriginResponseHead, body: ByteBuffer) {
        self.head = head
        self.body = body
    }
}
