/// RFC 3339 / ISO 8601 UTC timestamps (`2026-11-28T17:18:00Z`, `2026-11-28T17:18:00.123Z`), written by hand: the
/// same text Foundation's `ISO8601DateFormatter` writes (which rounds to the nearest millisecond before splitting the
/// seconds), without a formatter object and the lock one shared between threads would need.
package enum ISO8601Text {
    /// `epochSeconds` (seconds since 1970, as `Date.timeIntervalSince1970`) in UTC, with milliseconds when
    /// `fractionalSeconds`.
    package static func format(epochSeconds: Double, fractionalSeconds: Bool) -> String {
        // As CoreFoundation's formatter: milliseconds rounded half up, then floored into seconds.
        let milliseconds = Int64((epochSeconds * 1000 + 0.5).rounded(.down))
        let (seconds, millisecond) = floorDivision(milliseconds, 1000)
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = CivilDate.fields(daysSince1970: days)
        var text = ""
        text.reserveCapacity(24)
        append(Int64(year), width: 4, to: &text)
        text += "-"
        append(Int64(month), width: 2, to: &text)
        text += "-"
        append(Int64(day), width: 2, to: &text)
        text += "T"
        append(secondOfDay / 3600, width: 2, to: &text)
        text += ":"
        append(secondOfDay / 60 % 60, width: 2, to: &text)
        text += ":"
        append(secondOfDay % 60, width: 2, to: &text)
        if fractionalSeconds {
            text += "."
            append(millisecond, width: 3, to: &text)
        }
        text += "Z"
        return text
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (quotient: Int64, remainder: Int64) {
        let remainder = value % divisor
        return remainder < 0 ? (value / divisor - 1, remainder + divisor) : (value / divisor, remainder)
    }

    private static func append(_ value: Int64, width: Int, to text: inout String) {
        let digits = String(value)
        if digits.count < width { text += String(repeating: "0", count: width - digits.count) }
        text += digits
    }
}
