import HLSPlaylist
import HLSTestSupport
import Testing

/// EXT-X-DEFINE (RFC 8216bis §4.4.2.3): NAME/VALUE, QUERYPARAM, IMPORT, substituted before resolving.
@Suite struct VariableSubstitutionTests {
    @Test func definitionsAreIndexed() throws {
        let playlist = try Playlist(SamplePlaylists.variables.text)
        #expect(playlist.definitions.map(\.name) == ["cdn", "token", "session"])
        #expect(playlist.definitions.map(\.source) == [.value("https://cdn.example.com/v"), .queryParameter, .import])
        #expect(playlist.definitions.map(\.line) == [3, 4, 5])
        #expect(playlist.uriSlots.map(\.hasVariables) == [true, true, true])
    }

    @Test func substitutedInTheTimeline() throws {
        let sample = SamplePlaylists.variables
        let media = try Playlist(sample.text).media(baseURL: sample.baseURL, imports: sample.imports)
        #expect(media.segments.map(\.uri) == ["https://cdn.example.com/v/s42/seg1.m4s?token=abc", "../s42/seg2.m4s"])
        #expect(
            media.segments.map(\.url) == [
                "https://cdn.example.com/v/s42/seg1.m4s?token=abc", "https://origin.example.com/live/s42/seg2.m4s",
            ])
        #expect(media.segments[0].map?.url == "https://cdn.example.com/v/init.mp4?token=abc")
    }

    @Test func queryParameterComesFromTheBaseURL() throws {
        let playlist = try Playlist("#EXTM3U\n#EXT-X-DEFINE:QUERYPARAM=\"t\"\n#EXTINF:2,\nseg.ts?t={$t}\n")
        #expect(try playlist.resolvedURIs(baseURL: "https://h/a.m3u8?x=1&t=%2Fsecret&y").map(\.url) == ["https://h/seg.ts?t=%2Fsecret"])
        #expect(try playlist.resolvedURIs(baseURL: "https://h/a.m3u8?t=").map(\.url) == ["https://h/seg.ts?t="])
        // The same name elsewhere in the query does not match.
        let error = #expect(throws: PlaylistError.self) { try playlist.resolvedURIs(baseURL: "https://h/a.m3u8?tt=1&x=t") }
        #expect(error == .undefinedVariable)
        #expect(error?.line == 4)
    }

    @Test func missingImportIsReportedWhereItIsUsed() throws {
        let playlist = try Playlist("#EXTM3U\n#EXT-X-DEFINE:IMPORT=\"a\"\n#EXT-X-DEFINE:IMPORT=\"b\"\n#EXTINF:2,\n{$a}.ts\n")
        // b is never used: no error for it.
        #expect(try playlist.resolvedURIs(baseURL: "https://h/x.m3u8", imports: ["a": "seg"]).map(\.url) == ["https://h/seg.ts"])
        let rewriteError = #expect(throws: PlaylistError.self) {
            try playlist.rewrite(baseURL: "https://h/x.m3u8") { $0 + "?" + $1.rawValue }
        }
        #expect(rewriteError == .undefinedVariable)
        #expect(rewriteError?.line == 5)
        let mediaError = #expect(throws: PlaylistError.self) { try playlist.media(baseURL: "https://h/x.m3u8") }
        #expect(mediaError == .undefinedVariable)
        #expect(mediaError?.line == 5)
    }

    /// A proxy that has not seen the multivariant playlist keeps a URI with an unknown import as written (the
    /// player substitutes it); the others are rewritten as usual.
    @Test func aRewriteCanKeepURIsWithAnUnknownImport() throws {
        let text =
            "#EXTM3U\n#EXT-X-DEFINE:IMPORT=\"tok\"\n#EXT-X-DEFINE:NAME=\"d\",VALUE=\"s1\"\n#EXTINF:2,\n{$d}/a.ts?t={$tok}\n#EXTINF:2,\n{$d}/b.ts\n"
        let playlist = try Playlist(text)
        let kept = try playlist.rewrite(
            baseURL: "https://h/v/x.m3u8", keepingUnresolved: true, using: ClosureRewriterForTests { url, _ in "/p/" + url })
        #expect(String(decoding: kept, as: UTF8.self) == text.replacingOccurrences(of: "{$d}/b.ts", with: "/p/https://h/v/s1/b.ts"))
        let known = try playlist.rewrite(
            baseURL: "https://h/v/x.m3u8", imports: ["tok": "9"], keepingUnresolved: true,
            using: ClosureRewriterForTests { url, _ in "/p/" + url })
        #expect(String(decoding: known, as: UTF8.self).contains("/p/https://h/v/s1/a.ts?t=9\n"))
        #expect(throws: PlaylistError.undefinedVariable) {
            try playlist.rewrite(baseURL: "https://h/v/x.m3u8", using: ClosureRewriterForTests { url, _ in "/p/" + url })
        }
    }

    @Test func rewriteReplacesTheWholeReferenceAsWritten() throws {
        let sample = SamplePlaylists.variables
        let out = try Playlist(sample.text).rewrite(baseURL: sample.baseURL, imports: sample.imports) { url, _ in "/p/" + url }
        let text = String(decoding: out, as: UTF8.self)
        #expect(text.contains("\n/p/https://cdn.example.com/v/s42/seg1.m4s?token=abc\n"))
        #expect(text.contains("#EXT-X-MAP:URI=\"/p/https://cdn.example.com/v/init.mp4?token=abc\"\n"))
        // The definitions themselves are untouched.
        #expect(text.contains("#EXT-X-DEFINE:NAME=\"cdn\",VALUE=\"https://cdn.example.com/v\"\n"))
    }

    @Test func referencesThatAreNotVariablesStayLiteral() throws {
        let playlist = try Playlist("#EXTM3U\n#EXTINF:2,\na{b}c{$.ts\n")
        #expect(try playlist.resolvedURIs(baseURL: "https://h/x.m3u8").map(\.url) == ["https://h/a{b}c{$.ts"])
    }

    @Test func valuesAreSubstitutedOnce() throws {
        // A value that looks like a reference is not expanded again.
        let playlist = try Playlist(
            "#EXTM3U\n#EXT-X-DEFINE:NAME=\"a\",VALUE=\"{$b}\"\n#EXT-X-DEFINE:NAME=\"b\",VALUE=\"x\"\n#EXTINF:2,\n{$a}{$b}.ts\n")
        #expect(try playlist.resolvedURIs(baseURL: "https://h/x.m3u8").map(\.url) == ["https://h/{$b}x.ts"])
    }
}

/// A ``URIRewriter`` from a closure, without a directory-prefix fast path.
struct ClosureRewriterForTests: URIRewriter {
    var transform: @Sendable (String, URIRole) -> String?
    init(_ transform: @escaping @Sendable (String, URIRole) -> String?) { self.transform = transform }
    func rewrite(_ resolvedURL: String, role: URIRole) throws -> String? { transform(resolvedURL, role) }
}
