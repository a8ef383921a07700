import HLSCacheCore

/// Why a key could not be given out. Compare with the static values (`error == .expired`); equality ignores
/// the detail and the status. Every value maps to a status and a JSON body (docs/design.md §7, §8). Messages never
/// contain key bytes, header values or cookies.
package struct KeyError: Error, Hashable, Sendable, CustomStringConvertible, HTTPMappableError {
    private enum Code: String, Sendable, Hashable {
        case keyUnavailable, expired, forbidden, notFound, corrupted, masterKey, storage
    }

    private var _code: Code
    private var status: Int
    /// What happened, for logs and the JSON body.
    package private(set) var detail: String = ""
    /// The key's origin was unavailable (unreachable, timing out, 5xx, 408, 429): waiting may fix it. A prewarm then
    /// waits for the origin (`idle`) instead of failing.
    package private(set) var isTransient = false

    private init(_ code: Code, _ status: Int) {
        _code = code
        self.status = status
    }

    /// The key could not be fetched from the origin (unreachable, refused, not exactly 16 bytes) and no
    /// readable copy is stored. 502, or 403 when a stored copy exists but cannot be decrypted.
    package static let keyUnavailable = KeyError(.keyUnavailable, 502)
    /// The stored key is past its expiry and the origin did not renew it (403).
    package static let expired = KeyError(.expired, 403)
    /// The client may not receive keys (not loopback, not in `keys.allow`) (403).
    package static let forbidden = KeyError(.forbidden, 403)
    /// No key is registered under this id (404).
    package static let notFound = KeyError(.notFound, 404)
    /// A segment does not decrypt to valid PKCS#7 padding with its key and IV (502).
    package static let corrupted = KeyError(.corrupted, 502)
    /// The master key is missing, malformed or unsafe (500).
    package static let masterKey = KeyError(.masterKey, 500)
    /// The key database failed (500).
    package static let storage = KeyError(.storage, 500)

    /// A copy with a detail message (shown after the kind's sentence; never put key bytes or secrets in it).
    package func with(_ detail: String) -> KeyError {
        var copy = self
        copy.detail = detail
        return copy
    }

    /// A copy marked as fixable by waiting (``isTransient``).
    func transient(_ value: Bool) -> KeyError {
        var copy = self
        copy.isTransient = value
        return copy
    }

    /// A copy answered with another status.
    func withStatus(_ status: Int) -> KeyError {
        var copy = self
        copy.status = status
        return copy
    }

    package var httpStatus: Int { status }

    package var code: String { _code.rawValue }

    package var message: String {
        let base: String
        switch _code {
        case .keyUnavailable: base = "the key is not available"
        case .expired: base = "the key has expired and could not be renewed"
        case .forbidden: base = "keys are served to local clients only"
        case .notFound: base = "no such key"
        case .corrupted: base = "the segment does not decrypt with its key"
        case .masterKey: base = "the master key is unusable"
        case .storage: base = "the key store failed"
        }
        return detail.isEmpty ? base : "\(base): \(detail)"
    }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs._code == rhs._code }
    package func hash(into hasher: inout Hasher) { hasher.combine(_code) }
    package var description: String { "KeyError.\(_code.rawValue)(\(message))" }
}
