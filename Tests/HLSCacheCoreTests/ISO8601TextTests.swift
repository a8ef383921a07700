import Foundation
import HLSCacheCore
import Testing

/// The hand-written ISO 8601 timestamps are the text `ISO8601DateFormatter` writes, with and without milliseconds,
/// on the edges where rounding decides (x.9995 s, the last millisecond of a day, of a year, a leap day) and on
/// random dates from 1970 to 2103.
@Suite struct ISO8601TextTests {
    static func formatters() -> (fractional: ISO8601DateFormatter, whole: ISO8601DateFormatter) {
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return (fractional, ISO8601DateFormatter())
    }

    static func mismatches(_ samples: [Double]) -> [String] {
        let (fractional, whole) = formatters()
        var found: [String] = []
        for seconds in samples {
            let date = Date(timeIntervalSince1970: seconds)
            let expected = (fractional.string(from: date), whole.string(from: date))
            let written = (
                ISO8601Text.format(epochSeconds: date.timeIntervalSince1970, fractionalSeconds: true),
                ISO8601Text.format(epochSeconds: date.timeIntervalSince1970, fractionalSeconds: false)
            )
            if expected != written { found.append("\(seconds): \(expected) vs \(written)") }
        }
        return found
    }

    @Test func edgesAreWrittenAsFoundationWritesThem() {
        let edges: [Double] = [
            0, 0.0005, 0.0004, 0.9995, 0.9994, 0.4995, 59.9996, 86_399.9996, 951_782_400, 951_868_799.9995, 1_000_000_000.9995,
            1_764_349_080.1235, 4_102_444_799.9999, 1_709_164_800,
        ]
        #expect(Self.mismatches(edges) == [])
        #expect(ISO8601Text.format(epochSeconds: 951_782_400, fractionalSeconds: false) == "2000-02-29T00:00:00Z")
        #expect(ISO8601Text.format(epochSeconds: 0.9995, fractionalSeconds: true) == "1970-01-01T00:00:01.000Z")
    }

    @Test func randomDatesAreWrittenAsFoundationWritesThem() {
        var generator = SystemRandomNumberGenerator()
        var samples: [Double] = []
        for _ in 0..<20_000 { samples.append(Double.random(in: 0...4.2e9, using: &generator)) }
        for _ in 0..<20_000 { samples.append(Double(Int64.random(in: 0...4_200_000_000_000, using: &generator)) / 1000) }
        for _ in 0..<20_000 {
            samples.append(Double(Int64.random(in: 0...4_200_000_000, using: &generator)) + Double(Int.random(in: 0...9999)) / 10_000)
        }
        let found = Self.mismatches(samples)
        #expect(found.isEmpty, "\(found.count) of \(samples.count) differ, e.g. \(found.prefix(3))")
    }
}
