import HLSDownloader
import HLSPlaylist
import Testing

/// The recorded playlist written from a recording's rows (pure): keys with explicit IVs, the origin's
/// discontinuities and date-times kept, a missed run as one discontinuity, EVENT while growing and VOD at the end.
@Suite struct RecordingPlaylistTests {
    static let live = """
        #EXTM3U
        #EXT-X-VERSION:3
        #EXT-X-TARGETDURATION:2
        #EXT-X-MEDIA-SEQUENCE:40
        #EXT-X-KEY:METHOD=AES-128,URI="k1.key"
        #EXT-X-PROGRAM-DATE-TIME:2026-11-28T10:00:00.000Z
        #EXTINF:2.0,
        s40.ts
        #EXTINF:2.0,
        s41.ts
        #EXT-X-DISCONTINUITY
        #EXT-X-KEY:METHOD=AES-128,URI="k2.key",IV=0x000102030405060708090a0b0c0d0e0f
        #EXTINF:1.5,
        s42.ts
        #EXTINF:2.0,
        s43.ts

        """

    @Test func rowsMakeAPlaylistThatDecryptsAsTheOrigin() throws {
        let origin = try Playlist(bytes: Array(Self.live.utf8)).media(baseURL: "http://o.example/live/index.m3u8")
        // s41 missed (left the window while hlscache was stopped): s42 carries the gap.
        let rows = [
            RecordedSegment(origin.segments[0]), RecordedSegment(origin.segments[2], missedBefore: 1), RecordedSegment(origin.segments[3]),
        ]
        let growing = RecordingPlaylist.text(rows, ended: false)
        #expect(growing.contains("#EXT-X-PLAYLIST-TYPE:EVENT") && !growing.contains("#EXT-X-ENDLIST"))
        let text = RecordingPlaylist.text(rows, ended: true)
        #expect(text.contains("#EXT-X-PLAYLIST-TYPE:VOD") && text.hasSuffix("#EXT-X-ENDLIST\n"))
        #expect(text.contains("#EXT-X-PROGRAM-DATE-TIME:2026-11-28T10:00:00.000Z"))
        // The origin's discontinuity before s42 and the gap there are one break.
        #expect(text.components(separatedBy: "#EXT-X-DISCONTINUITY").count - 1 == 1)
        #expect(text.contains("# hlscache: 1 segment(s) missed here"))
        let recorded = try Playlist(bytes: Array(text.utf8)).media()
        #expect(
            recorded.segments.map(\.url) == [
                "http://o.example/live/s40.ts", "http://o.example/live/s42.ts", "http://o.example/live/s43.ts",
            ])
        #expect(recorded.segments.map(\.duration) == [2.0, 1.5, 2.0])
        // Every segment decrypts with the key and IV it had at the origin, although the numbers restart at 0.
        let wanted = [origin.segments[0], origin.segments[2], origin.segments[3]]
        for (segment, original) in zip(recorded.segments, wanted) {
            #expect(segment.key?.url == original.key?.url)
            #expect(segment.aes128IV == original.aes128IV)
        }
    }
}
