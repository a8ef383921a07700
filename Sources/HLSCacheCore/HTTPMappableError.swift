/// An error that can reach an HTTP client of the proxy: it knows the status to answer with and the short code
/// and message of the JSON body (`{"error": code, "message": message}`), docs/design.md §8.
package protocol HTTPMappableError: Error, Sendable {
    /// The status the proxy answers with.
    var httpStatus: Int { get }
    /// A short, stable, machine-readable code (`timeout`, `notFound`, …).
    var code: String { get }
    /// A human-readable sentence; may include details such as the origin host, never secrets.
    var message: String { get }
    /// Seconds a client should wait before asking again (`Retry-After`), when the answer says so.
    var retryAfterSeconds: Int? { get }
}

extension HTTPMappableError {
    package var retryAfterSeconds: Int? { nil }
}
