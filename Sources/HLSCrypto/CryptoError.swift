internal import CLibSSL

/// An error from a cryptographic operation.
///
/// Equality compares the kind only (`error == .authenticationFailed`); ``detail`` says why. Messages never
/// contain key material.
package struct CryptoError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: String, Hashable, Sendable {
        case invalidKeyLength
        case invalidIVLength
        case invalidInputLength
        case badPadding
        case authenticationFailed
        case randomFailure
        case openSSL
    }

    private var code: Code
    /// A human-readable explanation.
    package private(set) var detail: String

    private init(code: Code, detail: String = "") {
        self.code = code
        self.detail = detail
    }

    /// The stable machine-readable name of the error kind, e.g. `authenticationFailed`.
    package var name: String { code.rawValue }

    /// A key has the wrong number of bytes for the cipher.
    package static let invalidKeyLength = CryptoError(code: .invalidKeyLength)
    /// An IV or nonce has the wrong number of bytes.
    package static let invalidIVLength = CryptoError(code: .invalidIVLength)
    /// The input length is impossible for the operation (not whole blocks, shorter than nonce + tag).
    package static let invalidInputLength = CryptoError(code: .invalidInputLength)
    /// CBC decryption with padding found no valid PKCS#7 padding: wrong key or IV, or damaged data.
    package static let badPadding = CryptoError(code: .badPadding)
    /// A GCM tag did not verify: wrong key or AAD, or the data was modified.
    package static let authenticationFailed = CryptoError(code: .authenticationFailed)
    /// The system random generator failed.
    package static let randomFailure = CryptoError(code: .randomFailure)
    /// OpenSSL reported an unexpected internal failure.
    package static let openSSL = CryptoError(code: .openSSL)

    func with(_ detail: String) -> CryptoError {
        var copy = self
        copy.detail = detail
        return copy
    }

    /// `self` with the text of OpenSSL's most recent queued error, clearing the queue.
    func withOpenSSLError(_ operation: String) -> CryptoError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return with(operation) }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return with("\(operation): \(text)")
    }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    package func hash(into hasher: inout Hasher) { hasher.combine(code) }
    package var description: String { detail.isEmpty ? code.rawValue : "\(code.rawValue): \(detail)" }
}
