internal import CLibSSL

/// AES-128 in CBC mode, the cipher of HLS `METHOD=AES-128` segments (RFC 8216 §5.2).
package enum AES128CBC {
    /// Bytes in a key.
    package static let keyByteCount = 16
    /// Bytes in an IV and in a block.
    package static let blockByteCount = 16

    /// Decrypts `data`.
    ///
    /// - Parameters:
    ///   - padding: `true` to check and strip PKCS#7 padding (whole HLS segments); `false` to return every
    ///     decrypted byte (a range inside a segment).
    /// - Throws: ``CryptoError/invalidKeyLength``, ``CryptoError/invalidIVLength``,
    ///   ``CryptoError/invalidInputLength`` when `data` is not whole blocks, ``CryptoError/badPadding``.
    package static func decrypt<Bytes: Collection>(
        _ data: Bytes,
        key: [UInt8],
        iv: [UInt8],
        padding: Bool = true
    ) throws -> [UInt8] where Bytes.Element == UInt8 {
        try run(data, key: key, iv: iv, padding: padding, encrypt: false)
    }

    /// Encrypts `data`, adding PKCS#7 padding when `padding` is true (otherwise `data` must be whole blocks).
    package static func encrypt<Bytes: Collection>(
        _ data: Bytes,
        key: [UInt8],
        iv: [UInt8],
        padding: Bool = true
    ) throws -> [UInt8] where Bytes.Element == UInt8 {
        try run(data, key: key, iv: iv, padding: padding, encrypt: true)
    }

    /// Whether a CBC ciphertext ends in valid PKCS#7 padding, decrypting one block only.
    ///
    /// In CBC the last plaintext block depends only on the last ciphertext block and the one before it, so a
    /// downloaded segment can be checked against its key without decrypting all of it. A wrong key or a
    /// truncated file fails this check with probability about 255/256.
    ///
    /// - Parameters:
    ///   - lastTwoBlocks: the final 32 bytes of the ciphertext, or all 16 bytes when it is a single block.
    ///   - iv: the segment's IV; used only when `lastTwoBlocks` is a single block.
    /// - Returns: `false` when the bytes are not one or two whole blocks, or the padding is invalid.
    /// - Throws: ``CryptoError/invalidKeyLength`` or ``CryptoError/invalidIVLength``.
    package static func hasValidPadding<Bytes: Collection>(
        lastTwoBlocks: Bytes,
        key: [UInt8],
        iv: [UInt8]
    ) throws -> Bool where Bytes.Element == UInt8 {
        try checkSizes(key: key, iv: iv)
        let tail = Array(lastTwoBlocks)
        let chainIV: [UInt8]
        let block: ArraySlice<UInt8>
        switch tail.count {
        case blockByteCount:
            chainIV = iv
            block = tail[...]
        case 2 * blockByteCount:
            chainIV = Array(tail[0..<blockByteCount])
            block = tail[blockByteCount...]
        default:
            return false
        }
        let plain = try run(block, key: key, iv: chainIV, padding: false, encrypt: false)
        let n = Int(plain[blockByteCount - 1])
        guard n >= 1, n <= blockByteCount else { return false }
        return plain[(blockByteCount - n)...].allSatisfy { Int($0) == n }
    }

    private static func checkSizes(key: [UInt8], iv: [UInt8]) throws {
        guard key.count == keyByteCount else {
            throw CryptoError.invalidKeyLength.with("AES-128 needs a 16-byte key, got \(key.count)")
        }
        guard iv.count == blockByteCount else {
            throw CryptoError.invalidIVLength.with("AES-128-CBC needs a 16-byte IV, got \(iv.count)")
        }
    }

    private static func run<Bytes: Collection>(
        _ data: Bytes,
        key: [UInt8],
        iv: [UInt8],
        padding: Bool,
        encrypt: Bool
    ) throws -> [UInt8] where Bytes.Element == UInt8 {
        try checkSizes(key: key, iv: iv)
        let count = data.count
        if !encrypt || !padding {
            guard count % blockByteCount == 0, encrypt || count > 0 || !padding else {
                throw CryptoError.invalidInputLength.with("\(count) bytes is not a whole number of 16-byte blocks")
            }
        }
        let context = try CipherContext()
        let initialised = key.withUnsafeBufferPointer { k in
            iv.withUnsafeBufferPointer { i in
                EVP_CipherInit_ex(
                    context.pointer, EVP_aes_128_cbc(), nil, k.baseAddress, i.baseAddress, encrypt ? 1 : 0)
            }
        }
        guard initialised == 1 else { throw CryptoError.openSSL.withOpenSSLError("EVP_CipherInit_ex") }
        EVP_CIPHER_CTX_set_padding(context.pointer, padding ? 1 : 0)

        var output = [UInt8](repeating: 0, count: count + blockByteCount)
        let total: Int = try output.withUnsafeMutableBufferPointer { (out) throws -> Int in
            let written = try withContiguousBytes(data) { (input) throws -> Int in
                try context.update(input, into: out, at: 0)
            }
            var finalLength: Int32 = 0
            guard EVP_CipherFinal_ex(context.pointer, out.baseAddress! + written, &finalLength) == 1 else {
                if !encrypt && padding {
                    ERR_clear_error()
                    throw CryptoError.badPadding.with("the last block has no valid PKCS#7 padding")
                }
                throw CryptoError.openSSL.withOpenSSLError("EVP_CipherFinal_ex")
            }
            return written + Int(finalLength)
        }
        output.removeSubrange(total...)
        return output
    }
}
