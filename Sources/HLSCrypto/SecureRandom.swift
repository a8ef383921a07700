internal import CLibSSL

/// Cryptographically secure random bytes from OpenSSL's `RAND_bytes` (seeded from the kernel).
package enum SecureRandom {
    /// `count` random bytes.
    ///
    /// - Throws: ``CryptoError/randomFailure`` if the generator cannot produce output (not seeded).
    package static func bytes(_ count: Int) throws -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "invalid random byte count \(count)")
        var output = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return output }
        let ok = output.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard ok == 1 else { throw CryptoError.randomFailure.withOpenSSLError("RAND_bytes") }
        return output
    }
}
