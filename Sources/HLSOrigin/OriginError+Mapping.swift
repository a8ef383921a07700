import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension OriginError {
    /// Classifies an error from AsyncHTTPClient or NIO. After the head, a lost connection means the body
    /// is incomplete (`truncated`); before it, the origin is unreachable (`network`).
    static func mapping(_ error: any Error, afterHead: Bool) -> OriginError {
        if let error = error as? OriginError { return error }
        if let abort = error as? OriginTask.HandlerAbort {
            return abort.error as? OriginError ?? OriginError.cancelled.with("the stream handler failed: \(abort.error)")
        }
        let detail = plainDetail(error)
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout, .readTimeout, .writeTimeout, .deadlineExceeded, .tlsHandshakeTimeout,
                .httpProxyHandshakeTimeout, .socksHandshakeTimeout:
                return OriginError.timeout.with(detail)
            case .getConnectionFromPoolTimeout:
                // Rare: requests wait for a connection in OriginConnectionSlots, not in AsyncHTTPClient's pool.
                return OriginError.busy.with("no pooled connection to the origin came free (\(detail))")
            case .cancelled, .alreadyShutdown:
                return OriginError.cancelled.with(detail)
            case .remoteConnectionClosed:
                return (afterHead ? OriginError.truncated : OriginError.network).with(detail)
            case .invalidProxyResponse:
                return OriginError.network.with("the upstream proxy refused a tunnel to the origin (its answer to CONNECT was not 200)")
            case .proxyAuthenticationRequired:
                return OriginError.network.with("the upstream proxy asks for authentication (407)")
            default:
                break
            }
        }
        if let error = error as? ChannelError {
            switch error {
            case .connectTimeout: return OriginError.timeout.with(detail)
            case .eof, .ioOnClosedChannel, .alreadyClosed, .inputClosed:
                return (afterHead ? OriginError.truncated : OriginError.network).with(detail)
            default: break
            }
        }
        if afterHead, error is HTTPParserError { return OriginError.truncated.with(detail) }
        if afterHead, error is IOError { return OriginError.truncated.with(detail) }
        let typeName = String(reflecting: type(of: error))
        // NIOSOCKS's errors (`origin.proxy` = socks5://…), told apart by name so this module need not import it.
        if typeName.contains("SOCKSError") {
            if typeName.hasSuffix("ConnectionFailed") {
                return OriginError.network.with("the upstream SOCKS proxy could not connect to the origin (\(detail))")
            }
            if typeName.hasSuffix("NoValidAuthenticationMethod") || typeName.hasSuffix("InvalidAuthenticationSelection") {
                return OriginError.network.with("the upstream SOCKS proxy asks for authentication, which is not supported")
            }
            return OriginError.network.with("the upstream SOCKS proxy failed (\(detail))")
        }
        if typeName.contains("SSL") || typeName.contains("TLS") { return OriginError.tls.with(detail) }
        return OriginError.network.with(detail)
    }

    /// The words for a system error: `IOError`'s own text ("connection reset (error set): Connection refused)
    /// (errno: 111)") names NIO's call site, not what happened; a user reads "connection refused".
    static func plainDetail(_ error: any Error) -> String {
        if let error = error as? IOError { return systemMessage(error.errnoCode) }
        if let error = error as? NIOConnectionError {
            let failures = error.connectionErrors.map { failure in
                let reason = (failure.error as? IOError).map { systemMessage($0.errnoCode) } ?? String(describing: failure.error)
                return "\(reason) (\(failure.target.ipAddress ?? "\(failure.target)"))"
            }
            if !failures.isEmpty { return failures.joined(separator: ", ") }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "the host name \(error.host) could not be resolved" }
        }
        return String(describing: error)
    }

    /// `strerror` in lower case ("connection refused"), or the number when the system has no text for it.
    static func systemMessage(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "system error \(code)" }
        let message = String(cString: text)
        guard let first = message.first else { return "system error \(code)" }
        // "Connection refused" → "connection refused"; an acronym at the start ("TLS …") keeps its case.
        let second = message.dropFirst().first
        return second?.isUppercase == true ? message : first.lowercased() + message.dropFirst()
    }

    /// Whether a failure before the head is worth another attempt: the request never reached the origin or
    /// the origin dropped it (connect errors, resets). Read timeouts and TLS failures are not retried.
    static func isRetryableBeforeHead(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError {
            return error == .connectTimeout || error == .remoteConnectionClosed
        }
        if let error = error as? ChannelError {
            switch error {
            case .connectTimeout, .eof, .ioOnClosedChannel, .alreadyClosed, .inputClosed: return true
            default: return false
            }
        }
        if error is NIOConnectionError { return true }
        if let error = error as? IOError {
            return [ECONNREFUSED, ECONNRESET, EPIPE, ECONNABORTED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH]
                .contains(error.errnoCode)
        }
        return false
    }
}
