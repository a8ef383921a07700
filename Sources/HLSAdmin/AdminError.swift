import HLSCacheCore

/// Errors the admin API answers with itself (download errors keep their own codes and statuses).
package struct AdminError: HTTPMappableError, Hashable, CustomStringConvertible {
    package let httpStatus: Int
    package let code: String
    package let message: String

    private init(_ code: String, _ status: Int, _ message: String) {
        self.code = code
        self.httpStatus = status
        self.message = message
    }

    /// 400: a body that is not JSON, an unknown or invalid option.
    package static func badRequest(_ message: String) -> AdminError { AdminError("badRequest", 400, message) }
    /// 401: the configured bearer token is missing or wrong.
    package static func unauthorized(_ message: String) -> AdminError { AdminError("unauthorized", 401, message) }
    /// 403: the client's address is not allowed, or the Host is not one the API answers without a token.
    package static func forbidden(_ message: String) -> AdminError { AdminError("forbidden", 403, message) }
    /// 404: no such endpoint or item.
    package static func notFound(_ message: String) -> AdminError { AdminError("notFound", 404, message) }
    /// 405: the endpoint exists, the method does not.
    package static func methodNotAllowed(_ message: String) -> AdminError { AdminError("methodNotAllowed", 405, message) }
    /// 409: the item already exists, or the transition does not apply to its state.
    package static func conflict(_ message: String) -> AdminError { AdminError("invalidState", 409, message) }
    /// 415: a body that is not `application/json`.
    package static func unsupportedMediaType(_ message: String) -> AdminError { AdminError("unsupportedMediaType", 415, message) }
    /// 500: the items or key database failed.
    /// An error of something the server relies on (the origin of a key), with that error's own code.
    package static func upstream(_ code: String, _ message: String) -> AdminError { AdminError(code, 502, message) }

    package static func internalError(_ message: String) -> AdminError { AdminError("internal", 500, message) }

    package var description: String { "\(code) (\(httpStatus)): \(message)" }
}
