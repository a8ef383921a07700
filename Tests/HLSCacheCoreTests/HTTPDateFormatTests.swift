import Testing

@testable import HLSCacheCore

#if canImport(Glibc)
    import Glibc
#endif

/// ``HTTPDate/format(_:)`` writes IMF-fixdate by hand: the text C's `strftime` writes in the C locale, for every day
/// from 1970 to 2100 (at a varying time of day), around leap days and at the edges of a day.
@Suite struct HTTPDateFormatTests {
    static func reference(_ epochSeconds: Int64) -> String {
        var time = time_t(epochSeconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @Test func everyDayIsWrittenAsStrftimeWritesIt() {
        var mismatches: [String] = []
        var day: Int64 = 0
        while day < 47_847 {  // up to 2100-12-31
            let seconds = day * 86_400 + (day * 7_919) % 86_400
            if HTTPDate.format(seconds) != Self.reference(seconds) { mismatches.append("\(seconds)") }
            day += 1
        }
        for seconds: Int64 in [0, 86_399, 86_400, 951_782_400, 951_868_799, 1_709_164_800, 4_102_444_799, 1_764_349_080] {
            if HTTPDate.format(seconds) != Self.reference(seconds) { mismatches.append("\(seconds)") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.count) differ, e.g. \(mismatches.prefix(3))")
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test func whatIsWrittenParsesBack() {
        for seconds: Int64 in [0, 784_111_777, 951_782_400, 1_764_349_080, 4_102_444_799] {
            #expect(HTTPDate.parse(HTTPDate.format(seconds)) == seconds)
        }
    }
}
