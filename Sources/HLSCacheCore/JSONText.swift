/// JSON text written by hand where `JSONSerialization` and `JSONEncoder` cost too much (the admin API's listings,
/// one log line per event): the one string writer of the project (the admin API's JSON, the JSON log lines, the
/// proxy's error bodies).
package enum JSONText {
    /// Appends `text` as a JSON string: quotes, backslashes and control characters escaped; also DEL, and U+2028
    /// and U+2029 (line separators to JavaScript and to some log viewers), so a line stays one line everywhere.
    package static func appendString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0x2028 || scalar.value == 0x2029 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }

    /// `text` as a JSON string (``appendString(_:to:)``).
    package static func string(_ text: String) -> String {
        var out = ""
        appendString(text, to: &out)
        return out
    }
}
