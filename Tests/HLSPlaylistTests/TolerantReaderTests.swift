import HLSPlaylist
import HLSTestSupport
import Testing

/// The tolerant reader (`ParseOptions(tolerant: true)`, the proxy's serve path) refuses only what is no playlist at
/// all; every other departure from RFC 8216 is read as players read it, with a warning, and every byte outside the
/// URIs it finds stays as it was.
@Suite struct TolerantReaderTests {
    static let tolerant = ParseOptions(tolerant: true)
    static let base = "https://cdn.example/live/index.m3u8"

    static func parse(_ text: String) throws -> Playlist { try Playlist(text, options: tolerant) }

    /// Every URI the reader found becomes `/p/<url>`; the result, with the rewritten values put back, equals the input.
    static func rewritten(_ playlist: Playlist) throws -> String {
        String(decoding: try playlist.rewrite(baseURL: base, imports: [:], keepingUnresolved: true, using: Prefixer()), as: UTF8.self)
    }

    struct Prefixer: URIRewriter {
        func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? { "/p/" + resolvedURL }
    }

    /// Each strict refusal but "not a playlist at all" is a warning for the tolerant reader, and the playlist still
    /// serializes to its bytes.
    @Test(arguments: PlaylistErrorTests.parseCases.filter { $0.error != .notHLS })
    func strictRefusalIsAToleratedWarning(_ c: PlaylistErrorTests.Case) throws {
        let playlist = try Playlist(c.text, options: Self.tolerant)
        #expect(!playlist.warnings.isEmpty, "no warning for \(c.name)")
        #expect(playlist.serialize() == Array(c.text.utf8))
        let out = try playlist.rewrite(baseURL: Self.base, imports: [:], keepingUnresolved: true, using: Prefixer())
        #expect(try Playlist(bytes: out, options: Self.tolerant).uriSlots.count == playlist.uriSlots.count)
        _ = try playlist.media(baseURL: Self.base)
        _ = try playlist.master(baseURL: Self.base)
    }

    @Test(arguments: [
        "", "\u{FEFF}", "<!DOCTYPE html>\n<html><body>#EXTM3U</body></html>\n", "#EXT-X-TARGETDURATION:2\n#EXTINF:2,\ns.ts\n",
        "\u{0}\u{1}\u{2}GIF89a", "#EXTM3UX\n",
    ])
    func notAPlaylistIsStillRefused(text: String) {
        let error = #expect(throws: PlaylistError.self) { try Playlist(text, options: Self.tolerant) }
        #expect(error == .notHLS)
        #expect(error?.line == 1)
    }

    @Test func overTheSizeCapIsStillRefused() {
        let text = "#EXTM3U\n#EXTINF:2,\na.ts\n"
        let error = #expect(throws: PlaylistError.self) {
            try Playlist(text, options: ParseOptions(maxBytes: 10, tolerant: true))
        }
        #expect(error == .tooLarge)
    }

    @Test func whitespaceBeforeTheHeader() throws {
        let text = "\u{FEFF}\n  \r\n#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\na.ts\n"
        #expect(throws: PlaylistError.notHLS) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.warnings.map(\.kind) == [.leadingWhitespace])
        #expect(playlist.serialize() == Array(text.utf8))
        #expect(try Self.rewritten(playlist) == text.replacingOccurrences(of: "a.ts", with: "/p/https://cdn.example/live/a.ts"))
    }

    /// hls.js (`parseInt`) and VLC (`%d`) read `2.5` as 2.
    @Test func decimalTargetDuration() throws {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2.5\n#EXTINF:2.5,\na.ts\n#EXT-X-ENDLIST\n"
        #expect(throws: PlaylistError.invalidNumber) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.warnings.map(\.kind) == [.decimalInteger])
        #expect(playlist.warnings.first?.line == 2)
        #expect(try playlist.media().targetDuration == 2)
        #expect(try Self.rewritten(playlist) == text.replacingOccurrences(of: "\na.ts", with: "\n/p/https://cdn.example/live/a.ts"))
    }

    @Test func decimalBandwidth() throws {
        let text = "#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000.0,AVERAGE-BANDWIDTH=1000000.5,CODECS=\"avc1.4d401f\"\nv1/index.m3u8\n"
        #expect(throws: PlaylistError.invalidNumber) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.kind == .master)
        #expect(playlist.warnings.map(\.kind) == [.decimalInteger])
        #expect(playlist.warnings.first?.count == 2)
        let variant = try #require(try playlist.master(baseURL: Self.base).variants.first)
        #expect(variant.bandwidth == 1_280_000)
        #expect(variant.averageBandwidth == 1_000_000)
        #expect(try Self.rewritten(playlist) == text.replacingOccurrences(of: "\nv1/", with: "\n/p/https://cdn.example/live/v1/"))
    }

    /// A live playlist caught while the packager appends: the last EXTINF has no URI yet; players ignore it.
    @Test func danglingTrailingEXTINF() throws {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:6\n#EXTINF:6.0,\na.ts\n#EXTINF:6.0,\n"
        #expect(throws: PlaylistError.missingURI) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.warnings.map(\.kind) == [.danglingTag])
        #expect(playlist.warnings.first?.line == 5)
        let media = try playlist.media(baseURL: Self.base)
        #expect(media.segments.map(\.url) == ["https://cdn.example/live/a.ts"])
        #expect(media.totalDuration == 6)
        #expect(try Self.rewritten(playlist) == text.replacingOccurrences(of: "\na.ts", with: "\n/p/https://cdn.example/live/a.ts"))
    }

    @Test func iptvChannelList() throws {
        let text = """
            #EXTM3U x-tvg-url="http://epg.example/guide.xml"
            #EXTINF:-1 tvg-id="one" tvg-logo="http://logos.example/one.png" group-title="News",Channel One
            #EXTVLCOPT:http-user-agent=Mozilla/5.0
            #EXTGRP:News
            http://iptv.example/live/one/index.m3u8
            #EXTINF:-1 tvg-id="two",Channel Two
            #KODIPROP:inputstream=inputstream.adaptive
            http://iptv.example:8000/live/user/pass/1234.ts

            """
        #expect(throws: PlaylistError.self) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.isChannelList)
        #expect(playlist.kind == .media)
        #expect(playlist.warnings.map(\.kind) == [.channelList])
        #expect(playlist.warnings.first?.count == 2)
        let expected =
            text
            .replacingOccurrences(of: "\nhttp://iptv.example/", with: "\n/p/http://iptv.example/")
            .replacingOccurrences(of: "\nhttp://iptv.example:8000/", with: "\n/p/http://iptv.example:8000/")
        #expect(try Self.rewritten(playlist) == expected)
        let media = try playlist.media(baseURL: Self.base)
        #expect(media.segments.map(\.duration) == [0, 0])
        #expect(
            media.segments.map(\.url) == ["http://iptv.example/live/one/index.m3u8", "http://iptv.example:8000/live/user/pass/1234.ts"])
    }

    /// Kodi's `URL|Name=value&…` header suffix: the URL is rewritten, the suffix kept; the channel's headers include it.
    @Test func kodiHeaderSuffix() throws {
        let text = """
            #EXTM3U
            #EXTINF:-1 tvg-id="one",One
            #EXTVLCOPT:http-user-agent=VLC-Agent
            #EXTVLCOPT:http-referrer=http://portal.example/vlc
            http://iptv.example/one.m3u8|User-Agent=Kodi%2F20.0&Referer=http://portal.example/
            #EXTINF:-1 tvg-id="two",Two
            http://iptv.example/two.m3u8?a=1|b

            """
        let playlist = try Self.parse(text)
        #expect(playlist.warnings.map(\.kind).contains(.urlHeaders))
        let expected =
            text
            .replacingOccurrences(of: "\nhttp://iptv.example/one.m3u8|", with: "\n/p/http://iptv.example/one.m3u8|")
            .replacingOccurrences(of: "\nhttp://iptv.example/two.m3u8?a=1|b", with: "\n/p/http://iptv.example/two.m3u8?a=1|b")
        #expect(try Self.rewritten(playlist) == expected)
        let channels = try playlist.channels(baseURL: Self.base)
        #expect(channels.map(\.url) == ["http://iptv.example/one.m3u8", "http://iptv.example/two.m3u8?a=1|b"])
        #expect(channels.map(\.name) == ["One", "Two"])
        #expect(channels[0].attributes == [Channel.Option(name: "tvg-id", value: "one")])
        #expect(
            channels[0].httpHeaders == [
                Channel.Option(name: "User-Agent", value: "Kodi/20.0"), Channel.Option(name: "Referer", value: "http://portal.example/"),
            ])
        #expect(channels[1].httpHeaders.isEmpty)
    }

    /// `#KODIPROP:inputstream.adaptive.stream_headers=…` / `manifest_headers=…` and `#EXTHTTP:{json}` (TiviMate, OTT
    /// Navigator) name headers too; the lines stay byte for byte. Later sources win: `#EXTVLCOPT`, `#KODIPROP`,
    /// `#EXTHTTP`, the URL suffix. A header that cannot be sent (a control character, a name that is no token) is left out.
    @Test func kodiPropertiesAndExtHTTPHeaders() throws {
        let text = #"""
            #EXTM3U
            #EXTINF:-1 tvg-id="one",One
            #EXTVLCOPT:http-user-agent=VLC-Agent
            #KODIPROP:inputstream=inputstream.adaptive
            #KODIPROP:inputstream.adaptive.manifest_headers=User-Agent=Kodi%2F21&Referer=http%3A%2F%2Fportal.example%2Fk
            #EXTHTTP:{"Cookie":"s=1; t=2","X-Forwarded-For":"10.0.0.1","Bad\nName":"x","X-Bad":"a\r\nInjected: 1","X-U":"\u00e9\/"}
            http://iptv.example/one.m3u8
            #EXTINF:-1 tvg-id="two",Two
            #KODIPROP:inputstream.adaptive.stream_headers=User-Agent=Stream%2F1
            #EXTHTTP:{"User-Agent":"TiviMate/4.7"}
            http://iptv.example/two.m3u8
            #EXTINF:-1 tvg-id="three",Three
            #EXTHTTP:not json
            http://iptv.example/three.m3u8

            """#
        let playlist = try Self.parse(text)
        #expect(playlist.isChannelList)
        #expect(try Self.rewritten(playlist) == text.replacingOccurrences(of: "\nhttp://iptv.example/", with: "\n/p/http://iptv.example/"))
        let channels = try playlist.channels(baseURL: Self.base)
        #expect(
            channels[0].httpHeaders == [
                Channel.Option(name: "User-Agent", value: "Kodi/21"), Channel.Option(name: "Referer", value: "http://portal.example/k"),
                Channel.Option(name: "Cookie", value: "s=1; t=2"), Channel.Option(name: "X-Forwarded-For", value: "10.0.0.1"),
                Channel.Option(name: "X-U", value: "\u{E9}/"),
            ])
        #expect(channels[0].properties.first == Channel.Option(name: "inputstream", value: "inputstream.adaptive"))
        #expect(channels[1].httpHeaders == [Channel.Option(name: "User-Agent", value: "TiviMate/4.7")])
        #expect(channels[2].httpHeaders.isEmpty)
    }

    /// A list of URLs without any EXTINF (the simplest M3U).
    @Test func plainListOfURLs() throws {
        let text = "#EXTM3U\nhttp://a.example/one.m3u8\nhttp://b.example/two.ts\n"
        let playlist = try Self.parse(text)
        #expect(playlist.warnings.map(\.kind) == [.uriWithoutTag])
        #expect(try Self.rewritten(playlist) == "#EXTM3U\n/p/http://a.example/one.m3u8\n/p/http://b.example/two.ts\n")
    }

    @Test func durationFollowedByAttributes() throws {
        let text = "#EXTM3U\n#EXTINF:10.000 tvg-id=\"BBC\" tvg-name=\"BBC One\",BBC One\nbbc/seg1.ts\n#EXT-X-ENDLIST\n"
        #expect(throws: PlaylistError.segmentWithoutDuration) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.warnings.map(\.kind) == [.durationWithAttributes])
        #expect(!playlist.isChannelList)
        let media = try playlist.media(baseURL: Self.base)
        #expect(media.segments.map(\.duration) == [10])
        #expect(try Self.rewritten(playlist) == text.replacingOccurrences(of: "\nbbc/", with: "\n/p/https://cdn.example/live/bbc/"))
    }

    @Test func negativeMediaSequence() throws {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:-3\n#EXTINF:2,\na.ts\n#EXTINF:2,\nb.ts\n"
        #expect(throws: PlaylistError.invalidNumber) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.warnings.map(\.kind) == [.negativeNumber])
        #expect(try playlist.media().segments.map(\.mediaSequence) == [0, 1])
    }

    @Test func mapWithoutURI() throws {
        let text = "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MAP:BYTERANGE=\"100@0\"\n#EXTINF:2,\na.m4s\n"
        #expect(throws: PlaylistError.missingAttribute) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.warnings.map(\.kind) == [.missingAttribute])
        let media = try playlist.media(baseURL: Self.base)
        #expect(media.segments.count == 1)
        #expect(media.segments[0].map == nil)
        #expect(try Self.rewritten(playlist) == text.replacingOccurrences(of: "\na.m4s", with: "\n/p/https://cdn.example/live/a.m4s"))
    }

    @Test func sessionKeyInAMediaPlaylist() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-SESSION-KEY:METHOD=AES-128,URI="https://keys.example/k1"
            #EXT-X-KEY:METHOD=AES-128,URI="https://keys.example/k1"
            #EXTINF:2,
            a.ts

            """
        #expect(throws: PlaylistError.mixedPlaylistKinds) { try Playlist(text) }
        let playlist = try Self.parse(text)
        #expect(playlist.kind == .media)
        #expect(playlist.warnings.map(\.kind) == [.misplacedTag])
        #expect(playlist.uriSlots.map(\.role) == [.sessionKey, .key, .segment])
        let out = try Self.rewritten(playlist)
        #expect(out.components(separatedBy: "URI=\"/p/https://keys.example/k1\"").count == 3)
        #expect(try playlist.media(baseURL: Self.base).segments[0].key?.url == "https://keys.example/k1")
    }

    /// RFC 8216bis §4.3: variable references are substituted in hexadecimal-sequence values too. This is valid
    /// HLS: both readers accept it.
    @Test(arguments: [false, true])
    func variableInsideAnIV(tolerant: Bool) throws {
        let text = """
            #EXTM3U
            #EXT-X-DEFINE:NAME="two",VALUE="02"
            #EXT-X-TARGETDURATION:2
            #EXT-X-KEY:METHOD=AES-128,URI="k.bin",IV=0x000000000000000000000000000000{$two}
            #EXTINF:2,
            a.ts

            """
        let playlist = try Playlist(text, options: ParseOptions(tolerant: tolerant))
        #expect(playlist.warnings.isEmpty)
        let segment = try #require(try playlist.media(baseURL: Self.base).segments.first)
        #expect(segment.aes128IV == [UInt8](repeating: 0, count: 15) + [2])
    }

    /// Everything the corruption test feeds the strict reader, the tolerant one reads without a `PlaylistError`
    /// other than notHLS, keeps every byte, and finds ordered URI slots.
    @Test func corruptedInputsAreReadOrRefusedAsNotAPlaylist() throws {
        var inputs: [[UInt8]] = SamplePlaylists.all.map { Array($0.text.utf8) }
        for name in Fixtures.names { inputs.append(try Fixtures.bytes(name)) }
        let replacements: [UInt8] = Array("\"\n,=@-9:{$#x.".utf8)
        for input in inputs {
            for position in stride(from: 8, to: input.count, by: max(1, input.count / 40)) {
                for replacement in replacements {
                    var bytes = input
                    bytes[position] = replacement
                    let playlist: Playlist
                    do {
                        playlist = try Playlist(bytes: bytes, options: Self.tolerant)
                    } catch let error as PlaylistError {
                        #expect(error == .notHLS)
                        continue
                    }
                    #expect(playlist.serialize() == bytes)
                    var previousEnd = 0
                    for slot in playlist.uriSlots {
                        #expect(slot.range.lowerBound >= previousEnd && slot.range.upperBound <= bytes.count)
                        previousEnd = slot.range.upperBound
                    }
                    _ = try? playlist.media(baseURL: Self.base)
                    _ = try? playlist.master(baseURL: Self.base)
                    _ = try? playlist.rewrite(baseURL: Self.base, imports: [:], keepingUnresolved: true, using: Prefixer())
                }
            }
        }
    }

    /// The table of docs/playlist-engine.md, for the three rows no player behaviour decides: each is a warning of its
    /// kind, and the media view reads the value as the table says.
    @Test func invalidIVByteRangeAndAbsurdDurationAreReadAsTheTableSays() throws {
        let iv = try Self.parse("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-KEY:METHOD=AES-128,URI=\"k\",IV=0xZZ\n#EXTINF:2,\ns.ts\n")
        #expect(iv.warnings.map(\.kind).contains(.invalidIV))
        let ivSegment = try #require(try iv.media(baseURL: Self.base).segments.first)
        #expect(ivSegment.key?.iv == nil)
        #expect(ivSegment.aes128IV == [UInt8](repeating: 0, count: 16))

        let range = try Self.parse("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-BYTERANGE:ten@0\n#EXTINF:2,\ns.ts\n")
        #expect(range.warnings.map(\.kind).contains(.invalidByteRange))
        #expect(try range.media(baseURL: Self.base).segments.first?.byteRange == nil)

        let long = try Self.parse("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:100000,\ns.ts\n#EXTINF:2,\nt.ts\n")
        #expect(long.warnings.map(\.kind).contains(.absurdValue))
        let segments = try long.media(baseURL: Self.base).segments
        #expect(segments.count == 2)
        #expect(segments.first?.duration == 0)
        #expect(try Self.rewritten(long).contains("#EXTINF:100000,\n/p/https://cdn.example/live/s.ts\n"))
    }

    /// A rewriter is told each key's METHOD as written (``URIRewriter/rewriteKey(_:role:method:)``), which says the
    /// key's length; other URIs go through ``URIRewriter/rewrite(_:role:)``.
    @Test func keyURIsComeWithTheirMethod() throws {
        struct Recorder: URIRewriter {
            let seen: Box
            final class Box: @unchecked Sendable { var methods: [String] = [] }
            func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? { nil }
            func rewriteKey(_ resolvedURL: String, role: URIRole, method: String) throws -> String? {
                seen.methods.append("\(role.rawValue) \(method)")
                return "/k"
            }
        }
        let playlist = try Self.parse(
            "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI=\"s\"\n#EXT-X-KEY:METHOD=AES-256,URI=\"a\"\n"
                + "#EXTINF:2,\ns.ts\n#EXT-X-KEY:IV=0x01,URI=\"b\",METHOD=AES-128\n#EXTINF:2,\nt.ts\n")
        let recorder = Recorder(seen: Recorder.Box())
        let out = String(decoding: try playlist.rewrite(baseURL: Self.base, keepingUnresolved: true, using: recorder), as: UTF8.self)
        #expect(recorder.seen.methods == ["sessionKey SAMPLE-AES", "key AES-256", "key AES-128"])
        #expect(out.contains("#EXT-X-KEY:METHOD=AES-256,URI=\"/k\"\n"))
    }
}
