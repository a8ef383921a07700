import HLSCacheCore

/// Errors the admin API answers with itself (download errors keep their own codes and statuses).
public struct AdminError: HTTPMappableError, Hashable, CustomStringConvertible {
    public let httpStatus: Int
    public let code: String
    public let message: String

    private init(_ code: String, _ status: Int, _ message: String) {
        self.code = code
        self.httpStatus = status
        self.message = message
    }

    /// 400: a body that is not JSON, an unknown or invalid option.
    public static func badRequest(_ message: String) -> AdminError { AdminError("badRequest", 400, message) }
    /// 401: the configured bearer token is missing or wrong.
    public static func unauthorized(_ message: String) -> AdminError { AdminError("unauthorized", 401, message) }
    /// 403: the client's address is not allowed, or the Host is not one the API answers without a token.
    public static func forbidden(_ message: String) -> AdminError { AdminError("forbidden", 403, message) }
    /// 404: no such endpoint or item.
    public static func notFound(_ message: String) -> AdminError { AdminError("notFound", 404, message) }
    /// 405: the endpoint exists, the method does not.
    public static func methodNotAllowed(_ message: String) -> AdminError { AdminError("methodNotAllowed", 405, message) }
    /// 409: the item already exists, or the transition does not apply to its state.
    public static func conflict(_ message: String) -> AdminError { AdminError("invalidState", 409, message) }
    /// 415: a body that is not `application/json`.
    public static func unsupportedMediaType(_ message: String) -> AdminError { AdminError("unsupportedMediaType", 415, message) }
    /// 500: the items or key database failed.
    /// An error of something the server relies on (the origin of a key), with that error's own code.
    public static func upstream(_ code: String, _ message: String) -> AdminError { AdminError(code, 502, message) }

    public static func internalError(_ message: String) -> AdminError { AdminError("internal", 500, message) }

    public var description: String { "\(code) (\(httpStatus)): \(message)" }
}
