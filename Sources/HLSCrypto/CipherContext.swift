internal import CLibSSL

/// Owns one `EVP_CIPHER_CTX` for the duration of a single operation.
///
/// Not `Sendable` and never stored: every public entry point makes its own, so the public types stay stateless.
struct CipherContext: ~Copyable {
    let pointer: OpaquePointer

    init() throws {
        guard let pointer = EVP_CIPHER_CTX_new() else {
            throw CryptoError.openSSL.withOpenSSLError("EVP_CIPHER_CTX_new")
        }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    /// Feeds `input` through `EVP_CipherUpdate` in chunks (its lengths are `Int32`), appending to `output`
    /// starting at `offset`; returns the number of bytes written.
    func update(
        _ input: UnsafeBufferPointer<UInt8>,
        into output: UnsafeMutableBufferPointer<UInt8>,
        at offset: Int
    ) throws -> Int {
        let chunk = 1 << 30
        var written = 0
        var position = 0
        while position < input.count {
            let count = min(chunk, input.count - position)
            var outLength: Int32 = 0
            guard
                EVP_CipherUpdate(
                    pointer, output.baseAddress! + offset + written, &outLength,
                    input.baseAddress! + position, Int32(count)) == 1
            else { throw CryptoError.openSSL.withOpenSSLError("EVP_CipherUpdate") }
            written += Int(outLength)
            position += count
        }
        return written
    }
}
