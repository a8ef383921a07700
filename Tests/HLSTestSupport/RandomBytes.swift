/// `count` unpredictable bytes, quickly: SplitMix64 from one random seed, eight bytes per step.
///
/// `(0..<n).map { _ in UInt8.random(in: 0...255) }` makes one `getrandom` system call per byte; in a debug build
/// 256 KiB of it kept a thread of Swift's cooperative pool busy for seconds, and with 54 parameterised cases
/// asking for it at once the pool (two threads here) stalled every other test for up to 37 s.
package func randomBytes(_ count: Int) -> [UInt8] {
    var state = UInt64.random(in: .min ... .max)
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { buffer in
        var offset = 0
        while offset < count {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            withUnsafeBytes(of: z) { word in
                let n = min(8, count - offset)
                buffer.baseAddress!.advanced(by: offset).copyMemory(from: word.baseAddress!, byteCount: n)
            }
            offset += 8
        }
    }
    return bytes
}

/// Byte-for-byte equality as a plain `Bool`. `#expect(a == b)` on two arrays makes Swift Testing compute their
/// difference when they differ, which for two different megabyte bodies is O(N·D) and ran for many minutes (a whole
/// test run stuck at full CPU after one failed comparison); this reports the failure at once.
package func sameBytes<A: Sequence, B: Sequence>(_ a: A, _ b: B) -> Bool where A.Element == UInt8, B.Element == UInt8 {
    a.elementsEqual(b)
}
