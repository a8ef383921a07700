internal import CLibSSL

/// SHA-256 (FIPS 180-4) through OpenSSL's EVP interface; used to name cache objects.
package enum SHA256 {
    /// The number of bytes in a digest.
    package static let byteCount = 32

    /// The 32-byte digest of `bytes`.
    package static func digest<Bytes: Collection>(_ bytes: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        withContiguousBytes(bytes) { input in
            var output = [UInt8](repeating: 0, count: byteCount)
            var length: UInt32 = 0
            let ok = output.withUnsafeMutableBufferPointer { out in
                EVP_Digest(inputPointer(input), input.count, out.baseAddress, &length, EVP_sha256(), nil)
            }
            // EVP_Digest with a built-in digest only fails on allocation failure; there is no recovery.
            precondition(ok == 1 && length == UInt32(byteCount), "EVP_Digest(SHA-256) failed")
            return output
        }
    }

    /// The digest of the UTF-8 bytes of `string`.
    package static func digest(_ string: String) -> [UInt8] {
        digest(Array(string.utf8))
    }

    /// The digest of `bytes` as 64 lowercase hexadecimal characters.
    package static func hex<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        hexString(digest(bytes))
    }

    /// The digest of the UTF-8 bytes of `string` as 64 lowercase hexadecimal characters.
    package static func hex(_ string: String) -> String {
        hexString(digest(string))
    }

    /// `bytes` as lowercase hexadecimal.
    package static func hexString<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
