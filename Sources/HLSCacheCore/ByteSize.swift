/// Sizes as people write them in flags and config: `10GiB`, `500MB`, `100 MiB`, `4096`.
/// Binary (KiB, MiB, GiB, TiB) and decimal (KB, MB, GB, TB) units; `K`, `M`, `G`, `T` alone are binary.
package struct ByteSize: Sendable, Hashable, CustomStringConvertible {
    package let bytes: Int64

    package init(bytes: Int64) {
        self.bytes = bytes
    }

    package init?(_ text: String) {
        let trimmed = text.filter { $0 != " " && $0 != "_" }
        let digitsEnd = trimmed.firstIndex { !$0.isNumber && $0 != "." } ?? trimmed.endIndex
        guard let number = Double(trimmed[..<digitsEnd]), number >= 0, number.isFinite else { return nil }
        let unit = trimmed[digitsEnd...].lowercased()
        let multiplier: Double
        switch unit {
        case "", "b": multiplier = 1
        case "k", "kib": multiplier = 1024
        case "kb": multiplier = 1000
        case "m", "mib": multiplier = 1024 * 1024
        case "mb": multiplier = 1_000_000
        case "g", "gib": multiplier = 1024 * 1024 * 1024
        case "gb": multiplier = 1_000_000_000
        case "t", "tib": multiplier = 1024 * 1024 * 1024 * 1024
        case "tb": multiplier = 1_000_000_000_000
        default: return nil
        }
        let value = number * multiplier
        guard value < 9.2e18 else { return nil }
        bytes = Int64(value)
    }

    /// The largest binary unit that keeps the number readable: `10 GiB`, `1.5 MiB`, `512 B`.
    package var description: String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded)) \(units[unit])" : "\(rounded) \(units[unit])"
    }
}
