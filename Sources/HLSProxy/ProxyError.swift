import HLSCacheCore

/// Errors the proxy itself answers with. Each maps to a status and a JSON body (`ErrorBody`).
package struct ProxyError: HTTPMappableError, Hashable, CustomStringConvertible {
    private enum Code: String, Sendable, Hashable {
        case badRequest, notFound, methodNotAllowed, headersTooLarge, originStatus, corrupted, forbidden, unavailable, rangeNotSatisfiable,
            payloadTooLarge,
            preconditionFailed, notImplemented, pageNotAllowed, loopDetected
    }
    private var codeValue: Code
    package private(set) var httpStatus: Int
    package private(set) var message: String
    /// The origin's `Retry-After` for a passed-through 429/503, in seconds.
    package private(set) var retryAfterSeconds: Int?

    private init(_ code: Code, _ status: Int, _ message: String) {
        codeValue = code
        httpStatus = status
        self.message = message
    }

    package var code: String {
        switch codeValue {
        case .originStatus: return httpStatus == 404 ? "notFound" : "http"
        default: return codeValue.rawValue
        }
    }

    package static func badRequest(_ message: String) -> ProxyError { ProxyError(.badRequest, 400, message) }
    package static func notFound(_ message: String) -> ProxyError { ProxyError(.notFound, 404, message) }
    package static func methodNotAllowed(_ method: String) -> ProxyError {
        ProxyError(.methodNotAllowed, 405, "method \(method) is not supported here")
    }
    package static func headersTooLarge(_ message: String) -> ProxyError { ProxyError(.headersTooLarge, 431, message) }
    /// The origin answered with a non-success status: passed through as is.
    package static func originStatus(_ status: Int, host: String, retryAfter: Duration? = nil) -> ProxyError {
        var error = ProxyError(.originStatus, status, "origin \(host) answered \(status)")
        error.retryAfterSeconds = retryAfter.map { Int($0.components.seconds) }
        return error
    }
    /// The origin sent something that is not what it claims (a broken playlist).
    package static func corrupted(_ message: String) -> ProxyError { ProxyError(.corrupted, 502, message) }
    /// A request body larger than the server accepts (413).
    package static func payloadTooLarge(_ message: String) -> ProxyError { ProxyError(.payloadTooLarge, 413, message) }
    package static func forbidden(_ message: String) -> ProxyError { ProxyError(.forbidden, 403, message) }
    package static func unavailable(_ message: String) -> ProxyError { ProxyError(.unavailable, 503, message) }
    /// A method the server does not implement at all (501; RFC 9110 §9.1). Known methods that a path does not
    /// allow are ``methodNotAllowed(_:)``.
    package static func notImplemented(_ method: String) -> ProxyError {
        ProxyError(.notImplemented, 501, "method \(method) is not implemented")
    }
    /// A web page `http.allowedWebOrigins` does not allow asked for keys or a preflight (403).
    package static func pageNotAllowed(_ page: String) -> ProxyError {
        ProxyError(.pageNotAllowed, 403, "a web page from \(page) may not use this server (http.allowedWebOrigins)")
    }
    /// A request that came back to this server through an origin fetch of its own (508, RFC 5842).
    package static func loopDetected(_ message: String) -> ProxyError { ProxyError(.loopDetected, 508, message) }
    /// `If-Match` or `If-Unmodified-Since` did not hold for the cached object (412).
    package static func preconditionFailed(_ message: String) -> ProxyError { ProxyError(.preconditionFailed, 412, message) }
    /// A Range outside the representation (416).
    package static func rangeNotSatisfiable(size: Int64) -> ProxyError {
        ProxyError(.rangeNotSatisfiable, 416, "the requested range is outside the \(size)-byte resource")
    }

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
