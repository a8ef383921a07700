import Foundation
import HLSTestSupport
import Testing

/// Replays every input the fuzzer ever found (Tests/HLSPlaylistTests/FuzzRegressions) against the property it checks.
@Suite struct FuzzRegressionTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("FuzzRegressions")

    static var inputs: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// The replay below takes its cases from a directory listing: an empty or unreadable directory would run no case
    /// and still pass. (`make test` also fails on a parameterized test that found no cases: it is reported skipped.)
    @Test func theCorpusIsThere() {
        #expect(FileManager.default.fileExists(atPath: Self.directory.path))
        #expect(Self.inputs.count >= 20, "\(Self.inputs.count) inputs in \(Self.directory.path)")
    }

    @Test(arguments: inputs)
    func replays(_ name: String) throws {
        let bytes = [UInt8](try Data(contentsOf: Self.directory.appendingPathComponent(name)))
        try checkPlaylistProperty(bytes)
    }

    @Test func propertyHoldsOnHandPickedNastyInputs() throws {
        let inputs: [String] = [
            "", "#EXTM3U", "\u{FEFF}#EXTM3U\r\n#EXTINF:1,\r\na.ts\r\n", "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"{$v}\"\n",
            "#EXTM3U\n#EXT-X-DEFINE:NAME=\"v\",VALUE=\"k\"\n#EXT-X-KEY:METHOD=AES-128,URI=\"{$v}\"\n#EXTINF:1,\n{$v}.ts\n",
            "#EXTM3U\n#EXTINF:1,\n\r\n", "#EXTM3U\n#EXTINF:1,\n a b .ts \n", "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n//host\n",
            "#EXTM3U\n#EXTINF:0.000000000000000000000001,\na\n", "#EXTM3U\n#EXT-X-BYTERANGE:5\n#EXTINF:1,\na\n",
        ]
        for input in inputs { try checkPlaylistProperty(Array(input.utf8)) }
    }
}
