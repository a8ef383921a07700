import Foundation
import HLSCacheCore

/// How setting values are written in the config file, environment variables and flags, and back.
package enum SettingText {
    /// `500ms`, `10s`, `30m`, `24h`, `7d`, `2w`, or a plain number of seconds (`90`, `1.5`).
    package static func duration(_ text: String) -> Duration? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        let multiplier: Double
        var number = Substring(trimmed)
        if trimmed.hasSuffix("ms") {
            multiplier = 1
            number = number.dropLast(2)
        } else {
            switch trimmed.last {
            case "s": multiplier = 1000
            case "m": multiplier = 60_000
            case "h": multiplier = 3_600_000
            case "d": multiplier = 86_400_000
            case "w": multiplier = 604_800_000
            case let last? where last.isLetter: return nil
            default: multiplier = 1000
            }
            if trimmed.last?.isLetter == true { number = number.dropLast() }
        }
        guard !number.isEmpty, number.allSatisfy({ $0.isNumber || $0 == "." }), let value = Double(number), value.isFinite,
            value * multiplier < 1e14
        else { return nil }
        return .milliseconds(Int64((value * multiplier).rounded()))
    }

    /// The shortest exact spelling: `500ms`, `10s`, `24h`, `7d` (days from two days up, so a day stays `24h`).
    package static func format(_ duration: Duration) -> String {
        let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if milliseconds == 0 { return "0s" }
        if milliseconds >= 2 * 86_400_000, milliseconds % 86_400_000 == 0 { return "\(milliseconds / 86_400_000)d" }
        for (suffix, size) in [("h", Int64(3_600_000)), ("m", 60_000), ("s", 1000)] where milliseconds % size == 0 {
            return "\(milliseconds / size)\(suffix)"
        }
        return "\(milliseconds)ms"
    }

    /// A size in bytes as ``ByteSize`` reads it (`10GiB`, `500MB`, `4096`).
    package static func size(_ text: String) -> Int64? {
        ByteSize(text)?.bytes
    }

    /// The shortest exact binary spelling: `10GiB`, `100MiB`, `1536B`.
    package static func format(bytes: Int64) -> String {
        if bytes == 0 { return "0" }
        for (suffix, size) in [("TiB", Int64(1) << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] where bytes % size == 0 {
            return "\(bytes / size)\(suffix)"
        }
        return "\(bytes)"
    }

    /// `true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`.
    package static func bool(_ text: String) -> Bool? {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "yes", "on", "1": true
        case "false", "no", "off", "0": false
        default: nil
        }
    }

    /// A YAML-safe spelling of a string for `--print-config`.
    static func quoted(_ text: String) -> String {
        var escaped = ""
        for character in text {
            switch character {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            default: escaped.append(character)
            }
        }
        return "\"\(escaped)\""
    }
}
