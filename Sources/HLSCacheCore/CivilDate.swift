/// The proleptic Gregorian calendar's year, month (1–12) and day of a day counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), for the dates written by hand (``HTTPDate``, ``ISO8601Text``).
enum CivilDate {
    static func fields(daysSince1970 days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let month = Int(shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9)
        return (Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0), month, Int(dayOfYear - (153 * shiftedMonth + 2) / 5 + 1))
    }
}
