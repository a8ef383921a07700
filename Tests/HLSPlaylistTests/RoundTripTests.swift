import HLSPlaylist
import HLSTestSupport
import Testing

/// `serialize()` gives back the input, byte for byte, whatever the formatting.
@Suite struct RoundTripTests {
    @Test(arguments: Fixtures.names, TextVariant.allCases)
    func fixtureRoundTrips(name: String, variant: TextVariant) throws {
        let bytes = variant.apply(to: try Fixtures.text(name))
        let playlist = try Playlist(bytes: bytes)
        #expect(playlist.serialize() == bytes)
        #expect(playlist.bytes == bytes)
    }

    @Test(arguments: SamplePlaylists.all, TextVariant.allCases)
    func sampleRoundTrips(sample: SamplePlaylist, variant: TextVariant) throws {
        let bytes = variant.apply(to: sample.text)
        let playlist = try Playlist(bytes: bytes)
        #expect(playlist.serialize() == bytes)
    }

    /// Formatting must not change what the playlist means: the same URIs resolve, in the same order.
    @Test(arguments: SamplePlaylists.all, TextVariant.allCases)
    func formattingDoesNotChangeMeaning(sample: SamplePlaylist, variant: TextVariant) throws {
        let original = try Playlist(sample.text)
        let formatted = try Playlist(bytes: variant.apply(to: sample.text))
        #expect(formatted.kind == original.kind)
        let a = try original.resolvedURIs(baseURL: sample.baseURL, imports: sample.imports)
        let b = try formatted.resolvedURIs(baseURL: sample.baseURL, imports: sample.imports)
        #expect(a.map(\.url) == b.map(\.url))
        #expect(a.map(\.role) == b.map(\.role))
        if original.kind == .media {
            let m1 = try original.media(baseURL: sample.baseURL, imports: sample.imports)
            let m2 = try formatted.media(baseURL: sample.baseURL, imports: sample.imports)
            #expect(m1.segments.map(\.url) == m2.segments.map(\.url))
            #expect(m1.segments.map(\.duration) == m2.segments.map(\.duration))
            #expect(m1.segments.map(\.byteRange) == m2.segments.map(\.byteRange))
            #expect(m1.segments.map(\.mediaSequence) == m2.segments.map(\.mediaSequence))
            #expect(m1.targetDuration == m2.targetDuration)
        }
    }

    @Test func fixtureListIsComplete() throws {
        let onDisk = try Fixtures.namesOnDisk()
        #expect(onDisk == Fixtures.names.sorted())
    }

    @Test(arguments: [
        "#EXTM3U", "#EXTM3U\n", "#EXTM3U\r\n", "\u{FEFF}#EXTM3U\n\n\n", "#EXTM3U \n#EXT-X-ENDLIST",
        "#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\r\nseg.ts\r",
        "#EXTM3U\n\t#EXTINF:2,\n   seg.ts   \n",
        "#EXTM3U\n#EXTINF:2,\nsé g/ü.ts\n#EXT-X-LOWERCASE-unknown:é=\"ü\"\n",
    ])
    func edgeCaseRoundTrips(text: String) throws {
        let playlist = try Playlist(text)
        #expect(playlist.serialize() == Array(text.utf8))
    }
}
