import HLSCrypto

/// Checks on downloaded AES-128 segments, for the downloader (`hlscache fetch`).
package enum SegmentVerification {
    /// Verifies that an AES-128 segment decrypts to valid PKCS#7 padding, decrypting one block only.
    ///
    /// A wrong key, a wrong IV on a one-block segment, or a truncated or damaged download fails with
    /// probability about 255/256.
    /// - Parameters:
    ///   - lastTwoBlocks: the segment's final 32 bytes (16 if it is one block).
    ///   - key: the 16-byte key.
    ///   - iv: the segment's IV (explicit, or its media sequence number as a 128-bit big-endian integer).
    /// - Throws: ``KeyError/corrupted`` when the padding is invalid or the sizes are wrong.
    package static func verifySegment(lastTwoBlocks: some Collection<UInt8>, key: [UInt8], iv: [UInt8]) throws(KeyError) {
        let valid: Bool
        do {
            valid = try AES128CBC.hasValidPadding(lastTwoBlocks: lastTwoBlocks, key: key, iv: iv)
        } catch {
            throw KeyError.corrupted.with("cannot check the segment: \(error)")
        }
        guard valid else {
            throw KeyError.corrupted.with("the last block has no valid PKCS#7 padding (wrong key or IV, or a damaged download)")
        }
    }

    /// The default IV of a segment without an explicit `IV=`: its media sequence number as a 128-bit
    /// big-endian integer (RFC 8216 §5.2).
    package static func defaultIV(mediaSequence: UInt64) -> [UInt8] {
        [UInt8](repeating: 0, count: 8) + (0..<8).map { UInt8(truncatingIfNeeded: mediaSequence >> (56 - 8 * $0)) }
    }
}
