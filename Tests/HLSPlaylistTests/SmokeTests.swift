import Foundation
import HLSPlaylist
import HLSTestSupport
import Testing

@Suite struct SmokeTests {
    @Test func roundTripsAndRewrites() throws {
        let text = "#EXTM3U\r\n#EXT-X-TARGETDURATION:4\r\n#EXTINF:4.0,\r\nseg0.ts\r\n#EXT-X-ENDLIST\r\n"
        let playlist = try Playlist(text)
        #expect(playlist.serialize() == Array(text.utf8))
        let out = try playlist.rewrite(baseURL: "https://h/v/index.m3u8") { url, role in "/p?u=\(url)&r=\(role)" }
        #expect(
            String(decoding: out, as: UTF8.self) == text.replacingOccurrences(of: "seg0.ts", with: "/p?u=https://h/v/seg0.ts&r=segment"))
    }
}
