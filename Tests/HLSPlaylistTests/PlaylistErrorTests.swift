import HLSPlaylist
import HLSTestSupport
import Testing

/// Malformed input gives the right `PlaylistError` on the right line, never a crash.
@Suite struct PlaylistErrorTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var text: String
        var error: PlaylistError
        var line: Int
        var testDescription: String { name }
    }

    static let hex34 = "0x" + String(repeating: "ab", count: 17)

    static let parseCases: [Case] = [
        .init(name: "empty input", text: "", error: .notHLS, line: 1),
        .init(name: "only a BOM", text: "\u{FEFF}", error: .notHLS, line: 1),
        .init(name: "no #EXTM3U", text: "#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns.ts\n", error: .notHLS, line: 1),
        .init(name: "#EXTM3U prefix of another word", text: "#EXTM3UX\n", error: .notHLS, line: 1),
        .init(name: "HTML", text: "<html>\n#EXTM3U\n", error: .notHLS, line: 1),
        .init(
            name: "unterminated quote", text: "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"k.bin\n#EXTINF:2,\ns.ts\n",
            error: .truncatedAttributeList, line: 3),
        .init(name: "A= at end", text: "#EXTM3U\n#EXT-X-MAP:URI=\n", error: .truncatedAttributeList, line: 2),
        .init(name: "A= at end after items", text: "#EXTM3U\n#EXT-X-MAP:URI=\"i.mp4\",BYTERANGE=", error: .truncatedAttributeList, line: 2),
        .init(name: "A= at end, CRLF", text: "#EXTM3U\r\n#EXT-X-MAP:URI=\r\n", error: .truncatedAttributeList, line: 2),
        .init(name: "name without =", text: "#EXTM3U\n#EXT-X-MAP:URI\n", error: .truncatedAttributeList, line: 2),
        .init(
            name: "empty unquoted value", text: "#EXTM3U\n#EXT-X-MAP:URI=\"i\",BYTERANGE=  ,X=1\n", error: .truncatedAttributeList, line: 2),
        .init(name: "junk after quoted value", text: "#EXTM3U\n#EXT-X-MAP:URI=\"a\"b\n", error: .invalidAttribute, line: 2),
        .init(name: "empty attribute name", text: "#EXTM3U\n#EXT-X-MAP:=\"a\"\n", error: .invalidAttribute, line: 2),
        .init(name: "URI line without EXTINF", text: "#EXTM3U\n#EXT-X-TARGETDURATION:2\nseg.ts\n", error: .segmentWithoutDuration, line: 3),
        .init(
            name: "second URI line for one EXTINF", text: "#EXTM3U\n#EXTINF:2,\na.ts\nb.ts\n", error: .segmentWithoutDuration, line: 4),
        .init(name: "EXTINF without a number", text: "#EXTM3U\n#EXTINF:abc,\na.ts\n", error: .segmentWithoutDuration, line: 2),
        .init(name: "EXTINF empty", text: "#EXTM3U\n#EXTINF:\na.ts\n", error: .segmentWithoutDuration, line: 2),
        .init(name: "EXTINF NaN", text: "#EXTM3U\n#EXTINF:nan,\na.ts\n", error: .segmentWithoutDuration, line: 2),
        .init(name: "EXTINF at EOF", text: "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\n", error: .missingURI, line: 3),
        .init(name: "EXTINF at EOF without newline", text: "#EXTM3U\n#EXTINF:2,", error: .missingURI, line: 2),
        .init(name: "EXTINF then EXTINF", text: "#EXTM3U\n#EXTINF:2,\n#EXTINF:2,\na.ts\n", error: .missingURI, line: 2),
        .init(name: "STREAM-INF at EOF", text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n\n", error: .missingURI, line: 2),
        .init(
            name: "STREAM-INF then STREAM-INF", text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n#EXT-X-STREAM-INF:BANDWIDTH=2\nv.m3u8\n",
            error: .missingURI, line: 2),
        .init(name: "negative duration", text: "#EXTM3U\n#EXTINF:-1.5,\na.ts\n", error: .absurdValue, line: 2),
        .init(name: "ten-year duration", text: "#EXTM3U\n#EXTINF:315360000,\na.ts\n", error: .absurdValue, line: 2),
        .init(name: "huge duration, exponent", text: "#EXTM3U\n#EXTINF:1e300,\na.ts\n", error: .absurdValue, line: 2),
        .init(name: "huge duration, many digits", text: "#EXTM3U\n#EXTINF:99999999999999999999999,\na.ts\n", error: .absurdValue, line: 2),
        .init(name: "huge target duration", text: "#EXTM3U\n#EXT-X-TARGETDURATION:100000\n", error: .absurdValue, line: 2),
        .init(
            name: "overflowing media sequence", text: "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:18446744073709551616\n#EXTINF:2,\na.ts\n",
            error: .absurdValue, line: 2),
        .init(name: "negative media sequence", text: "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:-1\n", error: .invalidNumber, line: 2),
        .init(
            name: "overflowing discontinuity sequence", text: "#EXTM3U\n#EXT-X-DISCONTINUITY-SEQUENCE:99999999999999999999\n",
            error: .absurdValue, line: 2),
        .init(
            name: "overflowing byte range length", text: "#EXTM3U\n#EXTINF:2,\n#EXT-X-BYTERANGE:99999999999999999999@0\na.ts\n",
            error: .absurdValue, line: 3),
        .init(
            name: "byte range offset over 2^53", text: "#EXTM3U\n#EXTINF:2,\n#EXT-X-BYTERANGE:10@9007199254740993\na.ts\n",
            error: .absurdValue, line: 3),
        .init(name: "byte range not a number", text: "#EXTM3U\n#EXTINF:2,\n#EXT-X-BYTERANGE:ten@0\na.ts\n", error: .invalidNumber, line: 3),
        .init(
            name: "media tag in a master playlist",
            text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nv.m3u8\n#EXT-X-TARGETDURATION:2\n", error: .mixedPlaylistKinds, line: 4),
        .init(
            name: "master tag in a media playlist",
            text: "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\na.ts\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"x\"\n",
            error: .mixedPlaylistKinds, line: 5),
        .init(
            name: "implicit byte range after a non-ranged segment",
            text: "#EXTM3U\n#EXTINF:2,\na.ts\n#EXTINF:2,\n#EXT-X-BYTERANGE:100\na.ts\n", error: .invalidByteRange, line: 6),
        .init(
            name: "implicit byte range on the first segment", text: "#EXTM3U\n#EXTINF:2,\n#EXT-X-BYTERANGE:100\na.ts\n",
            error: .invalidByteRange, line: 4),
        .init(
            name: "implicit byte range of another resource",
            text: "#EXTM3U\n#EXTINF:2,\n#EXT-X-BYTERANGE:100@0\na.ts\n#EXTINF:2,\n#EXT-X-BYTERANGE:100\nb.ts\n",
            error: .invalidByteRange, line: 7),
        .init(name: "IV over 128 bits", text: "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=\(hex34)\n", error: .invalidNumber, line: 2),
        .init(name: "IV without 0x", text: "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=1234\n", error: .invalidNumber, line: 2),
        .init(name: "IV not hex", text: "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0xGG\n", error: .invalidNumber, line: 2),
        .init(name: "IV empty hex", text: "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0x\n", error: .invalidNumber, line: 2),
        .init(
            name: "session key IV", text: "#EXTM3U\n#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"k\",IV=0xZ\n", error: .invalidNumber, line: 2),
        .init(name: "key without METHOD", text: "#EXTM3U\n#EXT-X-KEY:URI=\"k\"\n", error: .missingAttribute, line: 2),
        .init(name: "AES-128 key without URI", text: "#EXTM3U\n#EXT-X-KEY:METHOD=AES-128\n", error: .missingAttribute, line: 2),
        .init(name: "map without URI", text: "#EXTM3U\n#EXT-X-MAP:BYTERANGE=\"1@0\"\n", error: .missingAttribute, line: 2),
        .init(name: "part without URI", text: "#EXTM3U\n#EXT-X-PART:DURATION=1\n", error: .missingAttribute, line: 2),
        .init(
            name: "steering without SERVER-URI", text: "#EXTM3U\n#EXT-X-CONTENT-STEERING:PATHWAY-ID=\"a\"\n", error: .missingAttribute,
            line: 2),
        .init(
            name: "I-frame variant without URI", text: "#EXTM3U\n#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=1\n", error: .missingAttribute, line: 2
        ),
        .init(name: "bandwidth not a number", text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=fast\nv.m3u8\n", error: .invalidNumber, line: 2),
        .init(
            name: "absurd bandwidth", text: "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=99999999999999999\nv.m3u8\n", error: .absurdValue, line: 2
        ),
        .init(name: "undefined variable", text: "#EXTM3U\n#EXTINF:2,\n{$cdn}/a.ts\n", error: .undefinedVariable, line: 3),
        .init(
            name: "variable used before its definition",
            text: "#EXTM3U\n#EXT-X-MAP:URI=\"{$p}/i.mp4\"\n#EXT-X-DEFINE:NAME=\"p\",VALUE=\"x\"\n", error: .undefinedVariable, line: 2),
        .init(
            name: "variable defined twice", text: "#EXTM3U\n#EXT-X-DEFINE:NAME=\"p\",VALUE=\"x\"\n#EXT-X-DEFINE:IMPORT=\"p\"\n",
            error: .invalidDefine, line: 3),
        .init(name: "NAME without VALUE", text: "#EXTM3U\n#EXT-X-DEFINE:NAME=\"p\"\n", error: .invalidDefine, line: 2),
        .init(name: "DEFINE without a name", text: "#EXTM3U\n#EXT-X-DEFINE:VALUE=\"p\"\n", error: .invalidDefine, line: 2),
        .init(name: "invalid variable name", text: "#EXTM3U\n#EXT-X-DEFINE:NAME=\"a b\",VALUE=\"p\"\n", error: .invalidDefine, line: 2),
    ]

    @Test(arguments: parseCases)
    func parseError(_ c: Case) {
        let error = #expect(throws: PlaylistError.self) { try Playlist(c.text) }
        #expect(error == c.error, "\(String(describing: error))")
        #expect(error?.line == c.line, "\(String(describing: error))")
    }

    @Test func inputOverTheLimit() throws {
        let text = try Fixtures.text("clear-ts.m3u8")
        let error = #expect(throws: PlaylistError.self) { try Playlist(text, options: ParseOptions(maxBytes: text.utf8.count - 1)) }
        #expect(error == .tooLarge)
        #expect(error?.line == 0)
        #expect(try Playlist(text, options: ParseOptions(maxBytes: text.utf8.count)).serialize() == Array(text.utf8))
    }

    @Test(arguments: ["/proxy/\"quoted\"", "/proxy/a\nb", "/proxy/a\r\nb", "/proxy/a\r"])
    func replacementThatCannotStandInAnAttribute(replacement: String) throws {
        let playlist = try Playlist("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:2,\na.m4s\n")
        let error = #expect(throws: PlaylistError.self) {
            try playlist.rewrite(baseURL: "https://h/p.m3u8") { _, role in role == .map ? replacement : nil }
        }
        #expect(error == .invalidReplacement)
        #expect(error?.line == 3)
    }

    @Test(arguments: ["/proxy/a\nb", "/proxy/a\r", "", "#EXT-X-ENDLIST"])
    func replacementThatCannotStandOnAURILine(replacement: String) throws {
        let playlist = try Playlist("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:2,\na.m4s\n")
        let error = #expect(throws: PlaylistError.self) {
            try playlist.rewrite(baseURL: "https://h/p.m3u8") { _, role in role == .segment ? replacement : nil }
        }
        #expect(error == .invalidReplacement)
        #expect(error?.line == 5)
    }

    /// A quote is harmless on a URI line.
    @Test func quoteOnAURILineIsAccepted() throws {
        let playlist = try Playlist("#EXTM3U\n#EXTINF:2,\na.ts\n")
        let out = try playlist.rewrite(baseURL: "https://h/p.m3u8") { _, _ in "/x?q=\"1\"" }
        #expect(String(decoding: out, as: UTF8.self) == "#EXTM3U\n#EXTINF:2,\n/x?q=\"1\"\n")
    }

    /// Sequence numbers that are valid on their own but overflow once segments are counted.
    @Test(arguments: [
        ("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:18446744073709551615\n#EXTINF:2,\na.ts\n#EXTINF:2,\nb.ts\n", 6),
        ("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:18446744073709551615\n#EXT-X-SKIP:SKIPPED-SEGMENTS=1\n#EXTINF:2,\na.ts\n", 5),
        ("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:18446744073709551615\n#EXTINF:2,\na.ts\n#EXT-X-PART:DURATION=1,URI=\"p.ts\"\n", 5),
        ("#EXTM3U\n#EXT-X-DISCONTINUITY-SEQUENCE:18446744073709551615\n#EXT-X-DISCONTINUITY\n#EXTINF:2,\na.ts\n", 5),
    ])
    func sequenceOverflowInTheTimeline(text: String, line: Int) throws {
        let playlist = try Playlist(text)
        let error = #expect(throws: PlaylistError.self) { try playlist.media() }
        #expect(error == .absurdValue)
        #expect(error?.line == line)
    }

    @Test func largestSequenceNumberIsFine() throws {
        let media = try Playlist("#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:18446744073709551615\n#EXTINF:2,\na.ts\n").media()
        #expect(media.segments.map(\.mediaSequence) == [UInt64.max])
        #expect(media.segments[0].aes128IV == nil)
    }

    /// Every prefix and many single-byte corruptions of every playlist either parse or throw a `PlaylistError`;
    /// nothing traps. The typed views are exercised too.
    @Test func corruptedInputsNeverCrash() async throws {
        try await onOwnThread { try corruptedInputsNeverCrashBlocking() }
    }

    /// Long and blocking: runs on a thread of its own (``onOwnThread(_:)``).
    func corruptedInputsNeverCrashBlocking() throws {
        var inputs: [[UInt8]] = SamplePlaylists.all.map { Array($0.text.utf8) }
        for name in Fixtures.names { inputs.append(try Fixtures.bytes(name)) }
        let replacements: [UInt8] = Array("\"\n,=@-9:{$#x".utf8) + [0]
        var tried = 0
        func attempt(_ bytes: [UInt8]) {
            tried += 1
            do {
                let playlist = try Playlist(bytes: bytes)
                #expect(playlist.serialize() == bytes)
                var previousEnd = 0
                for slot in playlist.uriSlots {
                    if slot.range.lowerBound < previousEnd || slot.range.upperBound > bytes.count {
                        Issue.record(
                            "URI slot out of order or out of bounds: \(slot.range) prev \(previousEnd) count \(bytes.count) in \(String(decoding: bytes, as: UTF8.self).debugDescription)"
                        )
                    }
                    previousEnd = slot.range.upperBound
                }
                _ = try? playlist.media(baseURL: "https://h/a/b.m3u8?token=1", imports: ["session": "s"])
                _ = try? playlist.master(baseURL: "https://h/a/b.m3u8")
                _ = try? playlist.rewrite(baseURL: "https://h/a/b.m3u8", imports: ["session": "s"]) { url, _ in "/p/\(url)" }
            } catch is PlaylistError {
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        for input in inputs {
            for end in 0...input.count { attempt(Array(input[..<end])) }
            for position in stride(from: 0, to: input.count, by: 3) {
                for replacement in replacements where input[position] != replacement {
                    var corrupted = input
                    corrupted[position] = replacement
                    attempt(corrupted)
                }
            }
        }
        #expect(tried > 10_000)
    }
}
