import NIOCore

/// Receives one origin response as it streams. All calls are made on the task's event loop, one at a time,
/// in order: at most one `didReceiveHead`, then `didReceiveBody` for each chunk, then `didFinish` exactly once
/// (also when there was no head: refused destination, origin unreachable, cancelled).
package protocol OriginStreamHandler: AnyObject, Sendable {
    /// The final response head (redirects and retries happen before it). Any status is delivered here;
    /// the handler decides what a 404 or 503 means to it.
    func didReceiveHead(_ head: OriginResponseHead)

    /// A chunk of the body. The next chunk is not read from the origin until the returned future completes,
    /// so a slow consumer slows the origin down instead of buffering. A failed future aborts the request:
    /// `didFinish` then receives that error if it is an `OriginError`, otherwise `.cancelled`.
    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void>

    /// The end: `.success` after the last byte of a complete body, or why it failed. After the head a failure
    /// is final (`.truncated`, `.network`, `.timeout`): nothing is retried once bytes may have been used.
    /// May arrive while a future returned by `didReceiveBody` is still pending.
    func didFinish(_ result: Result<Void, OriginError>)
}
