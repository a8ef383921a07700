#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// IMF-fixdate formatting and parsing (`Sun, 06 Nov 1994 08:49:37 GMT`) without Foundation's formatters,
/// which are slow enough to show up on the hit path.
package enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private static let dayNames: [UInt8] = Array("SunMonTueWedThuFriSat".utf8)
    private static let monthNames: [UInt8] = Array("JanFebMarAprMayJunJulAugSepOctNovDec".utf8)

    /// Formats seconds since the Unix epoch (years 0–9999), 29 bytes written in place: every cache hit sends its
    /// object's Last-Modified. About 0.06 µs a date, with no memo (the one it replaces was a lock every event loop
    /// shared) — docs/benchmarks.md, "Dates".
    package static func format(_ epochSeconds: Int64) -> String {
        var (days, second) = (epochSeconds / 86_400, epochSeconds % 86_400)
        if second < 0 { (days, second) = (days - 1, second + 86_400) }
        let weekday = Int((days % 7 + 11) % 7)  // 1970-01-01 was a Thursday
        let (year, month, day) = CivilDate.fields(daysSince1970: days)
        let (hour, minute, sec) = (Int(second / 3600), Int(second / 60 % 60), Int(second % 60))
        return String(unsafeUninitializedCapacity: 29) { out in
            func digit(_ value: Int) -> UInt8 { UInt8(truncatingIfNeeded: 48 + value) }
            func name(_ names: [UInt8], _ index: Int, at offset: Int) {
                out[offset] = names[index * 3]
                out[offset + 1] = names[index * 3 + 1]
                out[offset + 2] = names[index * 3 + 2]
            }
            func two(_ value: Int, at offset: Int) {
                out[offset] = digit(value / 10)
                out[offset + 1] = digit(value % 10)
            }
            name(dayNames, weekday, at: 0)
            (out[3], out[4], out[7], out[11], out[16], out[19], out[22], out[25]) = (44, 32, 32, 32, 32, 58, 58, 32)  // ", " " " ":"
            two(day, at: 5)
            name(monthNames, month - 1, at: 8)
            two(year / 100 % 100, at: 12)
            two(year % 100, at: 14)
            two(hour, at: 17)
            two(minute, at: 20)
            two(sec, at: 23)
            (out[26], out[27], out[28]) = (71, 77, 84)  // "GMT"
            return 29
        }
    }

    /// Parses an HTTP date in any of the three forms a recipient must accept (RFC 9110 §5.6.7): IMF-fixdate
    /// (`Sun, 06 Nov 1994 08:49:37 GMT`), the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and ANSI C's
    /// asctime (`Sun Nov  6 08:49:37 1994`). Anything else returns nil, which callers treat as an absent header.
    package static func parse(_ text: String) -> Int64? {
        let fields = text.split(separator: " ")
        switch fields.count {
        case 6:  // IMF-fixdate
            guard fields[0].hasSuffix(","), fields[5] == "GMT" else { return nil }
            return make(day: fields[1], month: fields[2], year: fields[3], clock: fields[4])
        case 4:  // rfc850-date: day-name "," SP day "-" month "-" 2DIGIT SP time SP "GMT"
            let date = fields[1].split(separator: "-", omittingEmptySubsequences: false)
            guard fields[0].hasSuffix(","), fields[3] == "GMT", date.count == 3, date[2].count == 2, let twoDigits = Int32(date[2]) else {
                return nil
            }
            return make(day: date[0], month: date[1], year: Substring(String(fullYear(twoDigits))), clock: fields[2])
        case 5:  // asctime-date: day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time SP year
            guard days.contains(String(fields[0])) else { return nil }
            return make(day: fields[2], month: fields[1], year: fields[4], clock: fields[3])
        default:
            return nil
        }
    }

    /// The year of a two-digit RFC 850 year: this century's, unless that is more than 50 years ahead (RFC 9110
    /// §5.6.7: then the most recent past year with those digits).
    package static func fullYear(_ twoDigits: Int32, now: Int64 = Int64(time(nil))) -> Int32 {
        var time = time_t(now)
        var parts = tm()
        gmtime_r(&time, &parts)
        let current = parts.tm_year + 1900
        let year = current - current % 100 + twoDigits
        return year > current + 50 ? year - 100 : year
    }

    private static func make(day dayText: Substring, month monthText: Substring, year yearText: Substring, clock clockText: Substring)
        -> Int64?
    {
        guard let day = Int32(dayText), let month = months.firstIndex(of: String(monthText)), yearText.count == 4,
            let year = Int32(yearText)
        else {
            return nil
        }
        let clock = clockText.split(separator: ":")
        guard clock.count == 3, let hour = Int32(clock[0]), let minute = Int32(clock[1]), let second = Int32(clock[2]),
            (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second), year >= 1970
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = Int32(month)
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Int64(timegm(&parts))
    }
}
