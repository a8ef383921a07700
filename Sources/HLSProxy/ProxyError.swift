import HLSCacheCore

/// Errors the proxy itself answers with. Each maps to a status and a JSON body (`ErrorBody`).
///
/// Compare with the static values (`error == .badRequest`): equality and hashing look at the kind only, not at the
/// message or the status an ``originStatus(_:host:retryAfter:)`` error carries (as ``OriginError``). The functions of
/// the same names make one with its message.
package struct ProxyError: HTTPMappableError, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable, Hashable {
        case badRequest, notFound, methodNotAllowed, headersTooLarge, originStatus, corrupted, forbidden, unavailable, rangeNotSatisfiable,
            payloadTooLarge, preconditionFailed, notImplemented, pageNotAllowed, loopDetected

        /// The status of an error of this kind (an origin status is passed through instead).
        var status: Int {
            switch self {
            case .badRequest: 400
            case .notFound: 404
            case .methodNotAllowed: 405
            case .headersTooLarge: 431
            case .originStatus, .corrupted: 502
            case .forbidden, .pageNotAllowed: 403
            case .unavailable: 503
            case .rangeNotSatisfiable: 416
            case .payloadTooLarge: 413
            case .preconditionFailed: 412
            case .notImplemented: 501
            case .loopDetected: 508
            }
        }
    }
    private var codeValue: Code
    package private(set) var httpStatus: Int
    package private(set) var message: String
    /// The origin's `Retry-After` for a passed-through 429/503, in seconds.
    package private(set) var retryAfterSeconds: Int?

    private init(_ code: Code, _ message: String = "", status: Int? = nil) {
        codeValue = code
        httpStatus = status ?? code.status
        self.message = message
    }

    package var code: String {
        switch codeValue {
        case .originStatus: return httpStatus == 404 ? "notFound" : "http"
        default: return codeValue.rawValue
        }
    }

    /// A request the server cannot read: malformed, smuggling-shaped, an invalid target (400).
    package static let badRequest = ProxyError(.badRequest)
    /// Nothing is served at the path (404).
    package static let notFound = ProxyError(.notFound)
    /// A known method the path does not allow (405).
    package static let methodNotAllowed = ProxyError(.methodNotAllowed)
    /// More or larger header fields than the server accepts (431).
    package static let headersTooLarge = ProxyError(.headersTooLarge)
    /// The origin answered with a non-success status, passed through as is. Matches any status.
    package static let originStatus = ProxyError(.originStatus)
    /// The origin sent something that is not what it claims (a broken playlist) (502).
    package static let corrupted = ProxyError(.corrupted)
    /// A request body larger than the server accepts (413).
    package static let payloadTooLarge = ProxyError(.payloadTooLarge)
    /// Refused to this client (403).
    package static let forbidden = ProxyError(.forbidden)
    /// Not available now: shutting down, no resources, a download that was cancelled (503).
    package static let unavailable = ProxyError(.unavailable)
    /// A method the server does not implement at all (501; RFC 9110 §9.1).
    package static let notImplemented = ProxyError(.notImplemented)
    /// A web page `http.allowedWebOrigins` does not allow (403).
    package static let pageNotAllowed = ProxyError(.pageNotAllowed)
    /// A request that came back to this server through an origin fetch of its own (508, RFC 5842).
    package static let loopDetected = ProxyError(.loopDetected)
    /// `If-Match` or `If-Unmodified-Since` did not hold for the cached object (412).
    package static let preconditionFailed = ProxyError(.preconditionFailed)
    /// A Range outside the representation (416).
    package static let rangeNotSatisfiable = ProxyError(.rangeNotSatisfiable)

    package static func badRequest(_ message: String) -> ProxyError { ProxyError(.badRequest, message) }
    package static func notFound(_ message: String) -> ProxyError { ProxyError(.notFound, message) }
    package static func methodNotAllowed(_ method: String) -> ProxyError {
        ProxyError(.methodNotAllowed, "method \(method) is not supported here")
    }
    package static func headersTooLarge(_ message: String) -> ProxyError { ProxyError(.headersTooLarge, message) }
    /// The origin answered with a non-success status: passed through as is.
    package static func originStatus(_ status: Int, host: String, retryAfter: Duration? = nil) -> ProxyError {
        var error = ProxyError(.originStatus, "origin \(host) answered \(status)", status: status)
        error.retryAfterSeconds = retryAfter.map { Int($0.components.seconds) }
        return error
    }
    /// The origin sent something that is not what it claims (a broken playlist).
    package static func corrupted(_ message: String) -> ProxyError { ProxyError(.corrupted, message) }
    /// A request body larger than the server accepts (413).
    package static func payloadTooLarge(_ message: String) -> ProxyError { ProxyError(.payloadTooLarge, message) }
    package static func forbidden(_ message: String) -> ProxyError { ProxyError(.forbidden, message) }
    package static func unavailable(_ message: String) -> ProxyError { ProxyError(.unavailable, message) }
    /// A method the server does not implement at all (501; RFC 9110 §9.1). Known methods that a path does not
    /// allow are ``methodNotAllowed(_:)``.
    package static func notImplemented(_ method: String) -> ProxyError {
        ProxyError(.notImplemented, "method \(method) is not implemented")
    }
    /// A web page `http.allowedWebOrigins` does not allow asked for keys or a preflight (403).
    package static func pageNotAllowed(_ page: String) -> ProxyError {
        ProxyError(.pageNotAllowed, "a web page from \(page) may not use this server (http.allowedWebOrigins)")
    }
    /// A request that came back to this server through an origin fetch of its own (508, RFC 5842).
    package static func loopDetected(_ message: String) -> ProxyError { ProxyError(.loopDetected, message) }
    /// `If-Match` or `If-Unmodified-Since` did not hold for the cached object (412).
    package static func preconditionFailed(_ message: String) -> ProxyError { ProxyError(.preconditionFailed, message) }
    /// A Range outside the representation (416).
    package static func rangeNotSatisfiable(size: Int64) -> ProxyError {
        ProxyError(.rangeNotSatisfiable, "the requested range is outside the \(size)-byte resource")
    }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.codeValue == rhs.codeValue }
    package func hash(into hasher: inout Hasher) { hasher.combine(codeValue) }
    package var description: String { "\(code) (\(httpStatus)): \(message)" }
}

/// The JSON body of every error response: `{"error":"timeout","message":"..."}`.
enum ErrorBody {
    static func json(code: String, message: String) -> String {
        "{\"error\":\(quote(code)),\"message\":\(quote(message))}\n"
    }

    static func quote(_ text: String) -> String {
        JSONText.string(text)
    }
}
