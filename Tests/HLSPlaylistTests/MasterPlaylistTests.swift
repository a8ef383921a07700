import HLSPlaylist
import HLSTestSupport
import Testing

/// The multivariant view: variants, I-frame variants, renditions, session data and keys, steering.
@Suite struct MasterPlaylistTests {
    @Test func ffmpegMasterFixture() throws {
        let playlist = try Playlist(try Fixtures.text("master.m3u8"))
        #expect(playlist.kind == .master)
        let master = try playlist.master(baseURL: Fixtures.baseURL("master.m3u8"))
        #expect(master.version == 3)
        #expect(master.variants.map(\.uri) == ["hi/index.m3u8", "lo/index.m3u8"])
        #expect(
            master.variants.map(\.url) == [
                "https://cdn.example.com/vod/show/hi/index.m3u8", "https://cdn.example.com/vod/show/lo/index.m3u8",
            ])
        #expect(master.variants.map(\.bandwidth) == [510_400, 235_400])
        #expect(master.variants.map { $0.resolution?.width } == [320, 160])
        #expect(master.variants.map { $0.resolution?.height } == [180, 90])
        #expect(master.variants.map(\.codecs) == ["avc1.42c014,mp4a.40.2", "avc1.42c00c,mp4a.40.2"])
        #expect(master.variants.map(\.audioGroup) == ["group_aud", "group_aud"])
        #expect(master.variants.map(\.line) == [4, 7])
        let audio = master.renditions(type: .audio, groupID: "group_aud")
        #expect(audio.count == 1)
        #expect(audio.first?.isDefault == true)
        #expect(audio.first?.language == "en")
        #expect(audio.first?.url == "https://cdn.example.com/vod/show/audio/index.m3u8")
        // Each variant's audio group exists.
        for variant in master.variants {
            #expect(!master.renditions(type: .audio, groupID: try #require(variant.audioGroup)).isEmpty)
        }
    }

    @Test func handWrittenMaster() throws {
        let sample = SamplePlaylists.master
        let master = try Playlist(sample.text).master(baseURL: sample.baseURL)
        #expect(master.version == 9)
        #expect(master.independentSegments)

        #expect(master.variants.count == 2)
        let low = master.variants[0], high = master.variants[1]
        #expect(low.bandwidth == 1_280_000)
        #expect(low.averageBandwidth == 1_000_000)
        #expect(high.averageBandwidth == nil)
        #expect(low.resolution?.width == 640 && low.resolution?.height == 360)
        #expect(high.resolution?.width == 1280 && high.resolution?.height == 720)
        #expect(low.codecs == "avc1.4d401e,mp4a.40.2")
        #expect(low.frameRate == 25)
        #expect(high.frameRate == 50)
        #expect(low.audioGroup == "aac" && low.subtitlesGroup == "subs" && low.closedCaptionsGroup == "cc")
        #expect(high.closedCaptionsGroup == "NONE")
        #expect(low.pathwayID == "CDN-A")
        #expect(high.url == "https://cdn2.example.com/video/720p.m3u8?sig=x%2Fy")
        #expect(high.attributes["CODECS"] == "avc1.4d401f,mp4a.40.2")

        #expect(master.iFrameVariants.count == 1)
        #expect(master.iFrameVariants[0].bandwidth == 86_000)
        #expect(master.iFrameVariants[0].url == SamplePlaylists.dir + "video/360p-iframes.m3u8")

        let audio = master.renditions(type: .audio, groupID: "aac")
        #expect(audio.map(\.name) == ["English", "Deutsch"])
        #expect(audio.map(\.language) == ["en", "de"])
        #expect(audio.map(\.isDefault) == [true, false])
        #expect(audio.map(\.autoselect) == [true, true])
        #expect(audio.map(\.channels) == ["2", nil])
        #expect(audio.map(\.url) == [SamplePlaylists.dir + "audio/en/index.m3u8", SamplePlaylists.dir + "audio/de/index.m3u8"])
        let subtitles = master.renditions(type: .subtitles, groupID: "subs")
        #expect(subtitles.map(\.url) == ["https://subs.example.net/en.m3u8"])
        #expect(subtitles.map(\.autoselect) == [false])
        let captions = master.renditions(type: .closedCaptions, groupID: "cc")
        #expect(captions.map(\.instreamID) == ["CC1"])
        #expect(captions.map(\.uri) == [nil])
        #expect(master.renditions(type: .audio, groupID: "subs").isEmpty)

        #expect(master.sessionData.map(\.dataID) == ["com.example.title", "com.example.meta"])
        #expect(master.sessionData[0].value == "Example" && master.sessionData[0].url == nil)
        #expect(master.sessionData[1].url == SamplePlaylists.dir + "meta/session.json")

        #expect(master.sessionKeys.map(\.method) == [.aes128, .sampleAES])
        #expect(master.sessionKeys[0].url == "https://origin.example.com/live/keys/master.key")
        #expect(master.sessionKeys[0].iv == [0x1A, 0x2B])
        #expect(master.sessionKeys[1].keyFormat == "com.apple.streamingkeydelivery")
        #expect(master.sessionKeys[1].keyFormatVersions == "1")

        #expect(master.contentSteering?.serverURL == "https://origin.example.com/steering?video=1")
        #expect(master.contentSteering?.pathwayID == "CDN-A")
    }

    @Test func variablesAreExportedForImports() throws {
        let text = """
            #EXTM3U
            #EXT-X-DEFINE:NAME="host",VALUE="https://cdn.example.com"
            #EXT-X-DEFINE:QUERYPARAM="auth"
            #EXT-X-STREAM-INF:BANDWIDTH=1000
            {$host}/v/index.m3u8?auth={$auth}

            """
        let master = try Playlist(text).master(baseURL: "https://origin.example.com/m.m3u8?auth=xyz")
        #expect(master.variables == ["host": "https://cdn.example.com", "auth": "xyz"])
        #expect(master.variants.map(\.uri) == ["https://cdn.example.com/v/index.m3u8?auth=xyz"])

        let media = try Playlist("#EXTM3U\n#EXT-X-DEFINE:IMPORT=\"host\"\n#EXTINF:2,\n{$host}/seg.ts\n")
        let segments = try media.media(baseURL: "https://x/y.m3u8", imports: master.variables).segments
        #expect(segments.map(\.url) == ["https://cdn.example.com/seg.ts"])
    }

    @Test func badResolutionIsAnError() throws {
        let playlist = try Playlist("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1,RESOLUTION=640\nv.m3u8\n")
        let error = #expect(throws: PlaylistError.self) { try playlist.master() }
        #expect(error == .invalidNumber)
        #expect(error?.line == 2)
    }
}
