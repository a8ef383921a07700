/// Number parsing for playlist values: fast on bytes, strict about what it accepts, with a typed error
/// that names the line.
enum Numbers {
    /// Sanity bounds. Values outside them are errors, not clamped: a 10-year segment is a corrupt playlist.
    static let maxSegmentDuration: Double = 86_400
    static let maxByteOffset: UInt64 = 1 << 53
    static let maxBandwidth: UInt64 = 1_000_000_000_000

    /// A decimal-integer (`[0-9]+`). Returns nil when the text is not one; throws ``PlaylistError/absurdValue`` on overflow.
    static func integer(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> (value: UInt64, overflow: Bool)? {
        guard start < end else { return nil }
        var value: UInt64 = 0
        var overflow = false
        for i in start..<end {
            let d = bytes[i] &- UInt8(ascii: "0")
            guard d < 10 else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(UInt64(d))
            if o1 || o2 { overflow = true }
            value = s
        }
        return (value, overflow)
    }

    static func integer(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int, line: Int, what: String, max: UInt64 = .max)
        throws -> UInt64
    {
        guard let (value, overflow) = integer(bytes, start, end) else {
            throw PlaylistError.invalidNumber.at(line: line, "\(what) is not a decimal integer")
        }
        if overflow || value > max { throw PlaylistError.absurdValue.at(line: line, "\(what) is out of range") }
        return value
    }

    static func integer(_ text: String, line: Int, what: String, max: UInt64 = .max) throws -> UInt64 {
        var text = text
        return try text.withUTF8 { try integer($0, 0, $0.count, line: line, what: what, max: max) }
    }

    /// A decimal-floating-point or signed-decimal-floating-point. Plain `123.456` is parsed directly (exact for
    /// up to 15 significant digits); anything else (exponents, very long mantissas) goes through `Double(_:)`.
    static func decimal(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Double? {
        guard start < end else { return nil }
        var i = start
        var negative = false
        if bytes[i] == UInt8(ascii: "-") {
            negative = true
            i += 1
        }
        var mantissa: UInt64 = 0
        var digits = 0
        var scale = 0
        var sawDot = false
        var sawDigit = false
        while i < end {
            let c = bytes[i]
            let d = c &- UInt8(ascii: "0")
            if d < 10 {
                sawDigit = true
                if digits < 15 {
                    mantissa = mantissa * 10 + UInt64(d)
                    if mantissa != 0 { digits += 1 }
                    if sawDot {
                        scale += 1
                        if scale > 20 { return slowDecimal(bytes, start, end) }
                    }
                } else if !sawDot {
                    return slowDecimal(bytes, start, end)
                }
            } else if c == UInt8(ascii: "."), !sawDot {
                sawDot = true
            } else {
                return slowDecimal(bytes, start, end)
            }
            i += 1
        }
        guard sawDigit else { return nil }
        var value = Double(mantissa)
        if scale > 0 {
            // 10^scale is exact in a Double for scale ≤ 22, so this is one correctly rounded division.
            var divisor = 1.0
            for _ in 0..<scale { divisor *= 10 }
            value /= divisor
        }
        return negative ? -value : value
    }

    private static func slowDecimal(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Double? {
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { return nil }
        // Reject forms Double accepts but HLS does not ("inf", "0x1p3", "+1").
        guard
            text.utf8.allSatisfy({
                ($0 &- UInt8(ascii: "0")) < 10 || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "e")
                    || $0 == UInt8(ascii: "E") || $0 == UInt8(ascii: "+")
            })
        else {
            return nil
        }
        return value
    }

    static func decimal(_ text: String, line: Int, what: String, range: ClosedRange<Double>) throws -> Double {
        var text = text
        let value = text.withUTF8 { decimal($0, 0, $0.count) }
        guard let value else { throw PlaylistError.invalidNumber.at(line: line, "\(what) is not a decimal number") }
        guard range.contains(value) else { throw PlaylistError.absurdValue.at(line: line, "\(what) \(value) is out of range") }
        return value
    }

    /// An integer read the way players read one (hls.js's `parseInt`): a decimal-integer as it is; a decimal
    /// (`2.5`, `1280000.0`) as its integer part; a negative number as 0. The kind says which tolerance applied
    /// (nil: none). Nil when the text is no number at all.
    static func tolerantInteger(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> (
        value: UInt64, tolerance: PlaylistWarning.Kind?
    )? {
        if let (value, overflow) = integer(bytes, start, end) {
            return overflow ? nil : (value, nil)
        }
        guard let value = decimal(bytes, start, end) else { return nil }
        if value < 0 { return (0, .negativeNumber) }
        guard value < 9.2e18 else { return nil }
        return (UInt64(value), .decimalInteger)
    }

    static func tolerantInteger(_ text: String) -> (value: UInt64, tolerance: PlaylistWarning.Kind?)? {
        var text = text
        return text.withUTF8 { tolerantInteger($0, 0, $0.count) }
    }

    /// The number at the start of `bytes[start..<end]` (`-?[0-9]*(.[0-9]*)?`), as players read an `EXTINF`
    /// duration followed by something else (`10.000 tvg-id="BBC"`, `-1 tvg-id=…`), and where it ends.
    static func leadingDecimal(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> (value: Double, end: Int)? {
        var i = start
        if i < end, bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: "+") { i += 1 }
        var sawDigit = false, sawDot = false
        while i < end {
            if (bytes[i] &- UInt8(ascii: "0")) < 10 {
                sawDigit = true
            } else if bytes[i] == UInt8(ascii: "."), !sawDot {
                sawDot = true
            } else {
                break
            }
            i += 1
        }
        guard sawDigit else { return nil }
        var from = start
        if bytes[from] == UInt8(ascii: "+") { from += 1 }
        var to = i
        if bytes[to - 1] == UInt8(ascii: ".") { to -= 1 }
        guard let value = decimal(bytes, from, to) else { return nil }
        return (value, i)
    }

    /// A hexadecimal-sequence `0x…` decoded to bytes (used for IVs).
    static func hexBytes(_ text: String) -> [UInt8]? {
        let u = Array(text.utf8)
        guard u.count > 2, u[0] == UInt8(ascii: "0"), u[1] | 0x20 == UInt8(ascii: "x") else { return nil }
        var digits = u[2...].map { c -> UInt8? in
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        if digits.contains(where: { $0 == nil }) { return nil }
        if digits.count % 2 == 1 { digits.insert(0, at: 0) }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var k = 0
        while k < digits.count {
            out.append(digits[k]! << 4 | digits[k + 1]!)
            k += 2
        }
        return out
    }

    /// `n[@o]` as used by `EXT-X-BYTERANGE` and the `BYTERANGE` attribute.
    static func byteRange(_ text: String, line: Int) throws -> (length: UInt64, offset: UInt64?) {
        let parts = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
        let length = try integer(String(parts[0]), line: line, what: "byte range length", max: maxByteOffset)
        var offset: UInt64?
        if parts.count == 2 { offset = try integer(String(parts[1]), line: line, what: "byte range offset", max: maxByteOffset) }
        return (length, offset)
    }
}
