internal import CLibSSL

/// HMAC-SHA256 (RFC 2104) through OpenSSL; signs the webhooks (`X-Hlscache-Signature`).
package enum HMACSHA256 {
    /// The number of bytes in a tag.
    package static let byteCount = 32

    /// The 32-byte tag of `message` under `key`.
    package static func authenticationCode(for message: [UInt8], key: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        let result = key.withUnsafeBufferPointer { keyBytes in
            message.withUnsafeBufferPointer { messageBytes in
                output.withUnsafeMutableBufferPointer { out in
                    // A zero-length buffer may have no base address; OpenSSL wants a pointer either way.
                    HMAC(
                        EVP_sha256(), UnsafeRawPointer(inputPointer(keyBytes)), Int32(keyBytes.count), inputPointer(messageBytes),
                        messageBytes.count, out.baseAddress, &length)
                }
            }
        }
        // HMAC with a built-in digest only fails on allocation failure; there is no recovery.
        precondition(result != nil && length == UInt32(byteCount), "HMAC(SHA-256) failed")
        return output
    }

    /// The tag of the UTF-8 bytes of `message` under the UTF-8 bytes of `key`, as 64 lowercase hexadecimal characters.
    package static func hex(_ message: String, key: String) -> String {
        SHA256.hexString(authenticationCode(for: Array(message.utf8), key: Array(key.utf8)))
    }

    /// Whether `tag` (hexadecimal, either case) is the tag of `message` under `key`, compared in constant time.
    package static func isValid(_ tag: String, for message: String, key: String) -> Bool {
        let expected = Array(hex(message, key: key).utf8)
        let given = Array(tag.lowercased().utf8)
        guard given.count == expected.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(given, expected) { difference |= a ^ b }
        return difference == 0
    }
}
