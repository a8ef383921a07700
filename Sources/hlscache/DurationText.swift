import ArgumentParser
import Foundation

/// Durations on the command line: `90s`, `30m`, `24h`, `7d`, or a plain number of seconds.
enum DurationText {
    static func parse(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard let last = trimmed.last else { return nil }
        let multiplier: Double
        var number = Substring(trimmed)
        switch last {
        case "s": multiplier = 1
        case "m": multiplier = 60
        case "h": multiplier = 3600
        case "d": multiplier = 86_400
        default: multiplier = 1
        }
        if last.isLetter { number = number.dropLast() }
        guard let value = Double(number), value >= 0, value.isFinite, value * multiplier < 1e11 else { return nil }
        return .milliseconds(Int64((value * multiplier * 1000).rounded()))
    }
}
