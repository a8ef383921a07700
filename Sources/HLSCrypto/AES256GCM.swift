internal import CLibSSL

/// AES-256 in GCM mode, used to keep HLS keys encrypted at rest (docs/design.md §7).
///
/// A sealed box is `nonce (12) | ciphertext | tag (16)`, with a fresh random nonce for every seal.
package enum AES256GCM {
    /// Bytes in a key.
    package static let keyByteCount = 32
    /// Bytes in the nonce that starts a sealed box.
    package static let nonceByteCount = 12
    /// Bytes in the authentication tag that ends a sealed box.
    package static let tagByteCount = 16

    /// Encrypts and authenticates `plaintext`, binding `aad` (authenticated, not encrypted, not stored).
    ///
    /// - Returns: `nonce | ciphertext | tag`.
    /// - Throws: ``CryptoError/invalidKeyLength``, ``CryptoError/randomFailure``, ``CryptoError/openSSL``.
    package static func seal<Bytes: Collection>(
        _ plaintext: Bytes,
        key: [UInt8],
        aad: [UInt8] = []
    ) throws -> [UInt8] where Bytes.Element == UInt8 {
        try checkKey(key)
        let nonce = try SecureRandom.bytes(nonceByteCount)
        let context = try CipherContext()
        try initialise(context, key: key, nonce: nonce, encrypt: true)
        try authenticate(context, aad: aad)

        let count = plaintext.count
        var box = [UInt8](repeating: 0, count: nonceByteCount + count + tagByteCount)
        try box.withUnsafeMutableBufferPointer { out in
            _ = UnsafeMutableRawBufferPointer(out).initializeMemory(as: UInt8.self, from: nonce)
            let written = try withContiguousBytes(plaintext) { input in
                try context.update(input, into: out, at: nonceByteCount)
            }
            var finalLength: Int32 = 0
            guard EVP_EncryptFinal_ex(context.pointer, out.baseAddress! + nonceByteCount + written, &finalLength) == 1
            else { throw CryptoError.openSSL.withOpenSSLError("EVP_EncryptFinal_ex") }
            guard
                EVP_CIPHER_CTX_ctrl(
                    context.pointer, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount),
                    out.baseAddress! + nonceByteCount + count) == 1
            else { throw CryptoError.openSSL.withOpenSSLError("EVP_CTRL_GCM_GET_TAG") }
        }
        return box
    }

    /// Verifies and decrypts a box made by ``seal(_:key:aad:)`` with the same key and `aad`.
    ///
    /// - Throws: ``CryptoError/authenticationFailed`` when the tag does not verify (wrong key or AAD, or
    ///   modified data), ``CryptoError/invalidInputLength`` when the box is shorter than nonce + tag,
    ///   ``CryptoError/invalidKeyLength``.
    package static func open<Bytes: Collection>(
        _ sealed: Bytes,
        key: [UInt8],
        aad: [UInt8] = []
    ) throws -> [UInt8] where Bytes.Element == UInt8 {
        try checkKey(key)
        let box = Array(sealed)
        guard box.count >= nonceByteCount + tagByteCount else {
            throw CryptoError.invalidInputLength.with("a sealed box has at least 28 bytes, got \(box.count)")
        }
        let count = box.count - nonceByteCount - tagByteCount
        let context = try CipherContext()
        try initialise(context, key: key, nonce: Array(box[0..<nonceByteCount]), encrypt: false)
        try authenticate(context, aad: aad)

        var plaintext = [UInt8](repeating: 0, count: count + AES128CBC.blockByteCount)
        try box.withUnsafeBufferPointer { input in
            try plaintext.withUnsafeMutableBufferPointer { out in
                let body = UnsafeBufferPointer(rebasing: input[nonceByteCount..<(nonceByteCount + count)])
                let written = count == 0 ? 0 : try context.update(body, into: out, at: 0)
                var tag = Array(input[(nonceByteCount + count)...])
                guard
                    EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), &tag) == 1
                else { throw CryptoError.openSSL.withOpenSSLError("EVP_CTRL_GCM_SET_TAG") }
                var finalLength: Int32 = 0
                guard EVP_DecryptFinal_ex(context.pointer, out.baseAddress! + written, &finalLength) == 1 else {
                    ERR_clear_error()
                    throw CryptoError.authenticationFailed.with("the GCM tag does not match")
                }
            }
        }
        plaintext.removeSubrange(count...)
        return plaintext
    }

    private static func checkKey(_ key: [UInt8]) throws {
        guard key.count == keyByteCount else {
            throw CryptoError.invalidKeyLength.with("AES-256 needs a 32-byte key, got \(key.count)")
        }
    }

    private static func initialise(_ context: borrowing CipherContext, key: [UInt8], nonce: [UInt8], encrypt: Bool) throws {
        let enc: Int32 = encrypt ? 1 : 0
        guard EVP_CipherInit_ex(context.pointer, EVP_aes_256_gcm(), nil, nil, nil, enc) == 1 else {
            throw CryptoError.openSSL.withOpenSSLError("EVP_CipherInit_ex(aes-256-gcm)")
        }
        guard EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(nonceByteCount), nil) == 1 else {
            throw CryptoError.openSSL.withOpenSSLError("EVP_CTRL_GCM_SET_IVLEN")
        }
        let ok = key.withUnsafeBufferPointer { k in
            nonce.withUnsafeBufferPointer { n in
                EVP_CipherInit_ex(context.pointer, nil, nil, k.baseAddress, n.baseAddress, enc)
            }
        }
        guard ok == 1 else { throw CryptoError.openSSL.withOpenSSLError("EVP_CipherInit_ex(key, nonce)") }
    }

    private static func authenticate(_ context: borrowing CipherContext, aad: [UInt8]) throws {
        guard !aad.isEmpty else { return }
        var outLength: Int32 = 0
        let ok = aad.withUnsafeBufferPointer { a in
            EVP_CipherUpdate(context.pointer, nil, &outLength, a.baseAddress, Int32(a.count))
        }
        guard ok == 1 else { throw CryptoError.openSSL.withOpenSSLError("EVP_CipherUpdate(aad)") }
    }
}
