import HLSCacheCore
import HLSDownloader
import HLSPlaylist
import HLSTestSupport
import Testing

@Suite struct SelectionAndPlanTests {
    static let master = """
        #EXTM3U
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="English",LANGUAGE="en-US",URI="audio/en.m3u8"
        #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="French",LANGUAGE="fr",URI="audio/fr.m3u8"
        #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",URI="subs/en.m3u8"
        #EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,AUDIO="aud",SUBTITLES="subs"
        low/index.m3u8
        #EXT-X-STREAM-INF:BANDWIDTH=2400000,RESOLUTION=1280x720,AUDIO="aud",SUBTITLES="subs"
        high/index.m3u8
        #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=100000,URI="low/iframes.m3u8"

        """

    private func select(_ v: String, _ a: String = "all", _ s: String = "all", iFrames: Bool = false) throws -> [String] {
        let master = try Playlist(Self.master).master(baseURL: "https://cdn.example.com/vod/master.m3u8")
        return try RenditionSelection(variants: v, audio: a, subtitles: s, iFrames: iFrames).select(from: master).map(\.url)
    }

    @Test func variantsAllBestWorstAndCap() throws {
        let base = "https://cdn.example.com/vod/"
        #expect(try select("all", "none", "none") == [base + "low/index.m3u8", base + "high/index.m3u8"])
        #expect(try select("best", "none", "none") == [base + "high/index.m3u8"])
        #expect(try select("worst", "none", "none") == [base + "low/index.m3u8"])
        #expect(try select("1M", "none", "none") == [base + "low/index.m3u8"])
        #expect(try select("100k", "none", "none") == [base + "low/index.m3u8"], "nothing fits: the lowest")
    }

    @Test func languagesFilterAudioAndSubtitles() throws {
        let base = "https://cdn.example.com/vod/"
        #expect(try select("best", "en", "none") == [base + "high/index.m3u8", base + "audio/en.m3u8"])
        #expect(
            try select("best", "all", "en") == [
                base + "high/index.m3u8", base + "audio/en.m3u8", base + "audio/fr.m3u8", base + "subs/en.m3u8",
            ])
        #expect(try select("best", "none", "none", iFrames: true) == [base + "high/index.m3u8", base + "low/iframes.m3u8"])
    }

    /// ffmpeg's `-master_pl_name` lists audio renditions as variants too (`CODECS="mp4a.40.2"`, no RESOLUTION):
    /// best, worst and a cap choose among the variants with video; `all` keeps every one.
    @Test func audioOnlyVariantsAreNotChosenAsTheVideo() throws {
        let text = """
            #EXTM3U
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aud",NAME="a0",LANGUAGE="en",AUTOSELECT=YES,URI="p2.m3u8"
            #EXT-X-STREAM-INF:BANDWIDTH=1400000,RESOLUTION=640x360,CODECS="avc1.64001e,mp4a.40.2",AUDIO="aud"
            p0.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=700000,CODECS="avc1.64000d,mp4a.40.2",AUDIO="aud"
            p1.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=140000,CODECS="mp4a.40.2",AUDIO="aud"
            p2.m3u8

            """
        let master = try Playlist(text).master(baseURL: "https://h/m.m3u8")
        func pick(_ v: String) throws -> [String] {
            try RenditionSelection(variants: v, audio: "none", subtitles: "none", iFrames: false).select(from: master).map(\.url)
        }
        #expect(try pick("worst") == ["https://h/p1.m3u8"])
        #expect(try pick("200k") == ["https://h/p1.m3u8"], "nothing with video fits: the lowest with video")
        #expect(try pick("best") == ["https://h/p0.m3u8"])
        #expect(try pick("all") == ["https://h/p0.m3u8", "https://h/p1.m3u8", "https://h/p2.m3u8"])
        // An audio-only stream (no variant with video) is still prewarmed.
        let audioOnly = try Playlist("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=64000,CODECS=\"mp4a.40.5\"\na.m3u8\n").master(
            baseURL: "https://h/m.m3u8")
        #expect(
            try RenditionSelection(variants: "worst", audio: "all", subtitles: "all", iFrames: false).select(from: audioOnly).map(\.url)
                == ["https://h/a.m3u8"])
    }

    /// `--audio en-US` selects a rendition labelled `en` (and `en` one labelled `en-US`); a language the stream
    /// does not have is reported, not silently dropped.
    @Test func languageTagsMatchEitherWayAndMissingOnesAreReported() throws {
        let master = try Playlist(Self.master).master(baseURL: "https://cdn.example.com/vod/master.m3u8")
        let base = "https://cdn.example.com/vod/"
        #expect(try select("best", "none", "en-GB") == [base + "high/index.m3u8", base + "subs/en.m3u8"])
        #expect(try select("best", "en", "none") == [base + "high/index.m3u8", base + "audio/en.m3u8"])
        let german = try RenditionSelection(variants: "best", audio: "de", subtitles: "fr", iFrames: false)
        #expect(
            german.unmatched(in: master) == [
                "--audio de matches no audio rendition of the chosen variants (they have: en-US, fr); none is downloaded",
                "--subtitles fr matches no subtitles rendition of the chosen variants (they have: en); none is downloaded",
            ])
        #expect(try RenditionSelection(variants: "best", audio: "fr", subtitles: "all", iFrames: false).unmatched(in: master).isEmpty)
    }

    @Test func badSpellingsAreRefused() {
        #expect(throws: DownloadError.invalidState) {
            try RenditionSelection(variants: "most", audio: "all", subtitles: "all", iFrames: false)
        }
        #expect(throws: DownloadError.invalidState) {
            try RenditionSelection(variants: "all", audio: ",", subtitles: "all", iFrames: false)
        }
    }

    static let media = """
        #EXTM3U
        #EXT-X-TARGETDURATION:2
        #EXT-X-MAP:URI="init.mp4"
        #EXT-X-KEY:METHOD=AES-128,URI="k1.key"
        #EXTINF:2,
        s0.m4s
        #EXTINF:2,
        s1.m4s
        #EXT-X-KEY:METHOD=AES-128,URI="k2.key"
        #EXTINF:2,
        s2.m4s
        #EXTINF:2,
        s3.m4s
        #EXT-X-ENDLIST

        """

    @Test func precacheTakesSegmentsStartingBeforeNWithMapsAndKeys() throws {
        let url = "https://cdn.example.com/v/index.m3u8"
        let media = try Playlist(Self.media).media(baseURL: url)
        let selected = SelectedPlaylist(url: url, role: .media, bandwidth: 1_000_000, name: nil, language: nil)
        let plan = try DownloadPlan.make(playlists: [try OriginURL(url)], renditions: [(selected, media)], seconds: 4)
        #expect(plan.isPartial)
        #expect(plan.segmentCount == 2)
        #expect(plan.media.map { $0.url.path } == ["/v/k1.key", "/v/init.mp4", "/v/s0.m4s", "/v/s1.m4s"])
        #expect(plan.estimatedBytes == Int64(500_000))
        let whole = try DownloadPlan.make(playlists: [try OriginURL(url)], renditions: [(selected, media)], seconds: 0)
        #expect(!whole.isPartial)
        #expect(whole.segmentCount == 4)
        #expect(whole.media.count { $0.kind.rawValue == "key" } == 2)
    }

    @Test func byteRangesStoreTheWholeFileOnceWithAnExactEstimate() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXTINF:2,
            #EXT-X-BYTERANGE:1000@0
            all.ts
            #EXTINF:2,
            #EXT-X-BYTERANGE:1500
            all.ts
            #EXTINF:2,
            #EXT-X-BYTERANGE:800
            all.ts
            #EXT-X-ENDLIST

            """
        let url = "https://cdn.example.com/r/index.m3u8"
        let media = try Playlist(text).media(baseURL: url)
        let selected = SelectedPlaylist(url: url, role: .media, bandwidth: nil, name: nil, language: nil)
        let plan = try DownloadPlan.make(playlists: [try OriginURL(url)], renditions: [(selected, media)], seconds: 3)
        #expect(plan.media.count == 1)
        // Two segments start before 3 s, but the file is stored whole: its size is the furthest range of all.
        #expect(plan.estimatedBytes == 3300)
        #expect(plan.media[0].knownLength == 3300)
        #expect(plan.segmentCount == 1)
    }

    /// A single-file fMP4 (`-hls_flags single_file`): the init section and every segment are ranges of one file,
    /// stored once and counted as a segment (not 0 segments).
    @Test func aSingleFileFMP4IsOneSegmentOfItsWholeSize() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:2
            #EXT-X-MAP:URI="main.mp4",BYTERANGE="800@0"
            #EXTINF:2,
            #EXT-X-BYTERANGE:1000@800
            main.mp4
            #EXTINF:2,
            #EXT-X-BYTERANGE:1200
            main.mp4
            #EXT-X-ENDLIST

            """
        let url = "https://cdn.example.com/f/index.m3u8"
        let media = try Playlist(text).media(baseURL: url)
        let selected = SelectedPlaylist(url: url, role: .media, bandwidth: nil, name: nil, language: nil)
        let plan = try DownloadPlan.make(playlists: [try OriginURL(url)], renditions: [(selected, media)], seconds: 1)
        #expect(plan.media.count == 1)
        #expect(plan.media[0].kind == .segment)
        #expect(plan.segmentCount == 1)
        #expect(plan.media[0].knownLength == 3000)
        #expect(plan.estimatedBytes == 3000)
    }

    @Test func volatileParametersAreLeftOutOfKeys() throws {
        let url = try OriginURL("https://cdn.example.com/v/index.m3u8?token=abc&x=1")
        let plan = try DownloadPlan.make(playlists: [url], renditions: [], seconds: 0)
        #expect(plan.playlists[0].key.value == "https://cdn.example.com/v/index.m3u8?x=1")
    }
}
