import Foundation

/// The hours of the day background downloads may run (`downloads.window`, an item's `window`), e.g. `22:00-06:00`:
/// PCD's permitted hours. Read in the server's time zone (``DownloadPolicies/timeZone``); a window whose end comes
/// before its start runs over midnight.
package struct DownloadWindow: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Minutes after midnight the window opens (0…1439).
    package let start: Int
    /// Minutes after midnight the window closes (0…1439), not equal to ``start``.
    package let end: Int

    /// `HH:MM-HH:MM` (24 hours); `nil` for anything else, or an empty window (start equals end).
    package init?(parsing text: String) {
        let parts = text.trimmingCharacters(in: .whitespaces).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = Self.minutes(parts[0]), let end = Self.minutes(parts[1]), start != end else { return nil }
        self.start = start
        self.end = end
    }

    private static func minutes(_ text: Substring) -> Int? {
        let fields = text.trimmingCharacters(in: .whitespaces).split(separator: ":", omittingEmptySubsequences: false)
        guard fields.count == 2, fields.allSatisfy({ (1...2).contains($0.count) && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
            let hour = Int(fields[0]), let minute = Int(fields[1]), (0...23).contains(hour), (0...59).contains(minute)
        else { return nil }
        return hour * 60 + minute
    }

    package init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let window = DownloadWindow(parsing: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "expected HH:MM-HH:MM"))
        }
        self = window
    }

    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    package var description: String {
        String(format: "%02d:%02d-%02d:%02d", start / 60, start % 60, end / 60, end % 60)
    }

    /// Whether downloads may run at `date` (the opening minute is in, the closing minute out).
    package func contains(_ date: Date, timeZone: TimeZone) -> Bool {
        let minute = Self.minuteOfDay(date, timeZone: timeZone)
        return start < end ? (start <= minute && minute < end) : (minute >= start || minute < end)
    }

    /// The next time the window opens after `date` (a wall-clock time that a DST change skips opens at the next
    /// existing time).
    package func nextOpening(after date: Date, timeZone: TimeZone) -> Date {
        let calendar = Self.calendar(timeZone)
        return calendar.nextDate(
            after: date, matching: DateComponents(hour: start / 60, minute: start % 60, second: 0), matchingPolicy: .nextTime)
            ?? date.addingTimeInterval(86400)
    }

    static func minuteOfDay(_ date: Date, timeZone: TimeZone) -> Int {
        let parts = calendar(timeZone).dateComponents([.hour, .minute], from: date)
        return (parts.hour ?? 0) * 60 + (parts.minute ?? 0)
    }

    static func calendar(_ timeZone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }
}
