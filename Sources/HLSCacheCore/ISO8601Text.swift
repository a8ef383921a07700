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
        let (year, month, day) = civilDate(daysSince1970: days)
        var text = ""
        text.reserveCapacity(24)
        append(year, width: 4, to: &text)
        text += "-"
        append(month, width: 2, to: &text)
        text += "-"
        append(day, width: 2, to: &text)
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

    /// Year, month and day of the proleptic Gregorian calendar (Howard Hinnant's `civil_from_days`).
    private static func civilDate(daysSince1970 days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func append(_ value: Int64, width: Int, to text: inout String) {
        let digits = String(value)
        if digits.count < width { text += String(repeating: "0", count: width - digits.count) }
        text += digits
    }
}
