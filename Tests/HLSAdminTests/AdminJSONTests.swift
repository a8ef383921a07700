import Foundation
@testable import HLSAdmin
import HLSTestSupport
import Testing

/// The API's own JSON writer (sorted keys, no escaped slashes): what it writes parses back to what it was given.
@Suite struct AdminJSONTests {
    @Test func writesWhatJSONSerializationReadsBack() throws {
        let meta = try JSONSerialization.jsonObject(
            with: Data(#"{"flag": true, "zero": 0, "one": 1, "pi": 3.25, "big": 12345678901234, "n": null, "s": "x"}"#.utf8))
        let object: [String: Any] = [
            "text": "quote \" backslash \\ slash / newline \n tab \t bell \u{07} é 🎬", "yes": true, "no": false, "int": 42,
            "int64": Int64(-7), "double": 33.3, "whole": 100.0, "list": [1, 2, 3], "strings": ["a", "b"], "nested": ["k": [[0.5, 4.0]]],
            "null": NSNull(), "meta": meta, "empty": [String: Any](), "emptyList": [Any](),
        ]
        let text = AdminJSON.string(object)
        #expect(!text.contains("\\/"), "slashes are not escaped")
        let keys = try #require(text.range(of: "\"double\"")).lowerBound < (try #require(text.range(of: "\"empty\"")).lowerBound)
        #expect(keys, "sorted keys")
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(parsed["text"] as? String == object["text"] as? String)
        #expect(parsed["yes"] as? Bool == true && parsed["no"] as? Bool == false)
        #expect(parsed["int"] as? Int == 42 && parsed["int64"] as? Int == -7)
        #expect(parsed["double"] as? Double == 33.3 && parsed["whole"] as? Int == 100)
        #expect(parsed["list"] as? [Int] == [1, 2, 3] && parsed["strings"] as? [String] == ["a", "b"])
        #expect((parsed["nested"] as? [String: Any])?["k"] as? [[Double]] == [[0.5, 4.0]])
        #expect(parsed["null"] is NSNull)
        let metaBack = try #require(parsed["meta"] as? [String: Any])
        #expect(text.contains(#""flag":true"#) && text.contains(#""one":1"#) && text.contains(#""zero":0"#), "\(text)")
        #expect(metaBack["pi"] as? Double == 3.25 && metaBack["big"] as? Int == 12345678901234 && metaBack["n"] is NSNull)
        #expect(AdminJSON.string(["a": 1]) == #"{"a":1}"#)
    }
}
