import Foundation
import HLSCacheCore
import Testing

/// The one JSON string writer (the admin API, the JSON log, error bodies): whatever the text, a JSON parser reads back
/// exactly it, and the written string holds no raw control character, DEL or line separator.
@Suite struct JSONTextTests {
    @Test func everyTextReadsBackAsWritten() throws {
        var texts = ["", "plain", "quote \" and backslash \\", "tab\tnew\nline\r", "\u{0}\u{1}\u{1F}\u{7F}", "\u{2028}\u{2029}", "é ☃ 𝄞 👍🏽"]
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Unicode.Scalar] = (0..<0x80).compactMap(Unicode.Scalar.init) + ["\u{2028}", "\u{2029}", "é", "☃", "𝄞"]
        for _ in 0..<2_000 {
            texts.append(
                String(
                    String.UnicodeScalarView(
                        (0..<Int.random(in: 0..<40, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })))
        }
        for text in texts {
            let written = JSONText.string(text)
            #expect(!written.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F || $0.value == 0x2028 || $0.value == 0x2029 })
            let parsed = try JSONSerialization.jsonObject(with: Data("[\(written)]".utf8)) as? [String]
            #expect(parsed == [text], "\(written)")
        }
    }

    @Test func appendsAfterWhatIsThere() {
        var out = "{\"k\":"
        JSONText.appendString("v\"", to: &out)
        #expect(out == "{\"k\":\"v\\\"\"")
    }
}
