import HLSCacheCore

/// Why an origin request failed. Compare with the static values (`error == .timeout`); equality ignores the
/// detail text and the carried status. Every value maps to the status the proxy answers with (docs/design.md §8).
package struct OriginError: Error, Hashable, Sendable, CustomStringConvertible, HTTPMappableError {
    private enum Code: String, Sendable, Hashable {
        case network, timeout, httpStatus, tooManyRedirects, forbiddenDestination, tooLarge, truncated, tls, cancelled, encoding, busy
    }

    private var _code: Code
    /// The origin's status for `httpStatus` errors, 0 otherwise.
    package private(set) var originStatus: Int = 0
    /// For a 429 or 503: how long the origin asked to be left alone (`Retry-After`), honoured by retries.
    package private(set) var retryAfter: Duration?
    package var retryAfterSeconds: Int? { retryAfter.map { Int($0.components.seconds) } }
    /// What happened, for logs and the JSON body; never contains header values or cookies.
    package private(set) var detail: String = ""

    /// The origin could not be reached or dropped the connection: refused, reset, DNS failure.
    package static let network = OriginError(_code: .network)
    /// Connecting took longer than the connect timeout, or no byte arrived within the read timeout.
    package static let timeout = OriginError(_code: .timeout)
    /// The origin answered with an error status; `originStatus` carries it. Matches any status.
    package static let httpStatus = OriginError(_code: .httpStatus)
    /// More redirects than `OriginConfiguration.maxRedirects`, or a redirect loop.
    package static let tooManyRedirects = OriginError(_code: .tooManyRedirects)
    /// The destination policy refused the host or one of the addresses it resolves to.
    package static let forbiddenDestination = OriginError(_code: .forbiddenDestination)
    /// The body is larger than the caller accepts.
    package static let tooLarge = OriginError(_code: .tooLarge)
    /// The connection ended before the body was complete (shorter than its Content-Length).
    package static let truncated = OriginError(_code: .truncated)
    /// The TLS handshake failed (certificate, protocol).
    package static let tls = OriginError(_code: .tls)
    /// The request was cancelled by the caller or by shutdown.
    package static let cancelled = OriginError(_code: .cancelled)
    /// The body came in a `Content-Encoding` that cannot be undone: an unknown coding (`br`), stacked codings,
    /// a range of a compressed body, or compressed data that does not decode.
    package static let encoding = OriginError(_code: .encoding)
    /// Every connection this process may open to the origin's host (`origin.maxConnectionsPerHost`) stayed busy
    /// for the wait limit (`origin.connectionWaitTimeout`): the origin was not asked.
    package static let busy = OriginError(_code: .busy)

    /// An `httpStatus` error carrying the origin's status.
    package static func httpStatus(_ status: Int) -> OriginError {
        var error = OriginError(_code: .httpStatus)
        error.originStatus = status
        return error
    }

    /// An `httpStatus` error for the answer `head`, with its `Retry-After`.
    package static func httpStatus(_ head: OriginResponseHead) -> OriginError {
        var error = httpStatus(head.status)
        error.retryAfter = head.retryAfter
        return error
    }

    /// A copy with a detail message.
    func with(_ detail: String) -> OriginError {
        var copy = self
        copy.detail = detail
        return copy
    }

    /// The status the proxy answers with: an unreachable or misbehaving origin is 502, a timeout 504, a
    /// refused destination 403; an origin 4xx/5xx is passed through as it is.
    package var httpStatus: Int {
        switch _code {
        case .network, .tooManyRedirects, .tooLarge, .truncated, .tls, .encoding: 502
        case .timeout: 504
        case .forbiddenDestination: 403
        case .cancelled, .busy: 503
        case .httpStatus: (400...599).contains(originStatus) ? originStatus : 502
        }
    }

    /// A short code for the JSON body; origin 404 is `notFound`, other origin statuses `http` (docs/design.md §5).
    package var code: String {
        switch _code {
        case .httpStatus: originStatus == 404 ? "notFound" : "http"
        default: _code.rawValue
        }
    }

    /// A sentence for the JSON body.
    package var message: String {
        let base: String
        switch _code {
        case .network: base = "the origin could not be reached"
        case .timeout: base = "the origin did not answer in time"
        case .httpStatus: base = "the origin answered with status \(originStatus)"
        case .tooManyRedirects: base = "the origin redirected too many times"
        case .forbiddenDestination: base = "the destination is not allowed"
        case .tooLarge: base = "the origin response is too large"
        case .truncated: base = "the origin response ended early"
        case .tls: base = "the TLS handshake with the origin failed"
        case .cancelled: base = "the origin request was cancelled"
        case .encoding: base = "the origin's content encoding cannot be decoded"
        case .busy: base = "no connection to the origin became free in time"
        }
        return detail.isEmpty ? base : "\(base): \(detail)"
    }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs._code == rhs._code }
    package func hash(into hasher: inout Hasher) { hasher.combine(_code) }
    package var description: String { "OriginError.\(_code.rawValue)(\(message))" }
}
