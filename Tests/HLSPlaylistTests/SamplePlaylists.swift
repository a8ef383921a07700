import HLSPlaylist
import HLSTestSupport
import Testing

/// A hand-written playlist with the URIs that RFC 3986 resolution of its references against ``baseURL`` gives,
/// in document order, for the slots the rewrite closure must see (no SAMPLE-AES keys, no `skd:`/`data:` URIs).
struct SamplePlaylist: Sendable, CustomTestStringConvertible {
    struct ExpectedURI: Sendable, Equatable, CustomStringConvertible {
        var url: String
        var role: URIRole
        var description: String { "\(role.rawValue) \(url)" }
    }

    var name: String
    var text: String
    var baseURL: String
    var imports: [String: String] = [:]
    var expected: [ExpectedURI]

    var testDescription: String { name }
}

enum SamplePlaylists {
    static let base = "https://origin.example.com/live/channel/index.m3u8?token=abc&ch=7"
    static let dir = "https://origin.example.com/live/channel/"

    /// Every multivariant URI-bearing element: content steering, session data and keys, renditions, variants,
    /// I-frame variants.
    static let master = SamplePlaylist(
        name: "master",
        text: """
            #EXTM3U
            #EXT-X-VERSION:9
            #EXT-X-INDEPENDENT-SEGMENTS
            #EXT-X-CONTENT-STEERING:SERVER-URI="/steering?video=1",PATHWAY-ID="CDN-A"
            #EXT-X-SESSION-DATA:DATA-ID="com.example.title",VALUE="Example",LANGUAGE="en"
            #EXT-X-SESSION-DATA:DATA-ID="com.example.meta",URI="meta/session.json"
            #EXT-X-SESSION-KEY:METHOD=AES-128,URI="../keys/master.key",IV=0x1A2B
            #EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI="skd://key-server/asset1",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="English",LANGUAGE="en",DEFAULT=YES,AUTOSELECT=YES,CHANNELS="2",URI="audio/en/index.m3u8"
            #EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID="aac",NAME="Deutsch",LANGUAGE="de",DEFAULT=NO,AUTOSELECT=YES,URI="audio/de/index.m3u8"
            #EXT-X-MEDIA:TYPE=SUBTITLES,GROUP-ID="subs",NAME="English",LANGUAGE="en",DEFAULT=NO,AUTOSELECT=NO,FORCED=NO,URI="https://subs.example.net/en.m3u8"
            #EXT-X-MEDIA:TYPE=CLOSED-CAPTIONS,GROUP-ID="cc",NAME="CC1",LANGUAGE="en",INSTREAM-ID="CC1"
            #EXT-X-STREAM-INF:BANDWIDTH=1280000,AVERAGE-BANDWIDTH=1000000,RESOLUTION=640x360,CODECS="avc1.4d401e,mp4a.40.2",FRAME-RATE=25.000,AUDIO="aac",SUBTITLES="subs",CLOSED-CAPTIONS="cc",PATHWAY-ID="CDN-A"
            video/360p.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2560000,RESOLUTION=1280x720,CODECS="avc1.4d401f,mp4a.40.2",FRAME-RATE=50,AUDIO="aac",SUBTITLES="subs",CLOSED-CAPTIONS=NONE
            //cdn2.example.com/video/720p.m3u8?sig=x%2Fy
            #EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=86000,RESOLUTION=640x360,CODECS="avc1.4d401e",URI="video/360p-iframes.m3u8"
            #EXT-X-IMAGE-STREAM-INF:BANDWIDTH=12000,RESOLUTION=320x180,CODECS="jpeg",URI="thumbs/320x180.m3u8"

            """,
        baseURL: base,
        expected: [
            .init(url: "https://origin.example.com/steering?video=1", role: .steeringServer),
            .init(url: dir + "meta/session.json", role: .sessionData),
            .init(url: "https://origin.example.com/live/keys/master.key", role: .sessionKey),
            .init(url: dir + "audio/en/index.m3u8", role: .rendition),
            .init(url: dir + "audio/de/index.m3u8", role: .rendition),
            .init(url: "https://subs.example.net/en.m3u8", role: .rendition),
            .init(url: dir + "video/360p.m3u8", role: .variant),
            .init(url: "https://cdn2.example.com/video/720p.m3u8?sig=x%2Fy", role: .variant),
            .init(url: dir + "video/360p-iframes.m3u8", role: .iFramePlaylist),
            .init(url: dir + "thumbs/320x180.m3u8", role: .imagePlaylist),
        ])

    /// LL-HLS delta update: server control, part info, skip, map, key, parts, preload hint, rendition reports,
    /// discontinuity, gap, bitrate.
    static let lowLatency = SamplePlaylist(
        name: "low-latency",
        text: """
            #EXTM3U
            #EXT-X-VERSION:9
            #EXT-X-TARGETDURATION:4
            #EXT-X-SERVER-CONTROL:CAN-BLOCK-RELOAD=YES,CAN-SKIP-UNTIL=24.0,PART-HOLD-BACK=3.0
            #EXT-X-PART-INF:PART-TARGET=1.0
            #EXT-X-MEDIA-SEQUENCE:100
            #EXT-X-DISCONTINUITY-SEQUENCE:5
            #EXT-X-SKIP:SKIPPED-SEGMENTS=10
            #EXT-X-MAP:URI="init.mp4"
            #EXT-X-KEY:METHOD=AES-128,URI="https://keys.example.com/k?id=1"
            #EXT-X-PROGRAM-DATE-TIME:2025-01-01T00:00:40.000Z
            #EXTINF:4.0,
            seg110.m4s
            #EXT-X-DISCONTINUITY
            #EXT-X-BITRATE:2000
            #EXTINF:4.0,
            seg111.m4s
            #EXT-X-PART:DURATION=1.0,URI="seg112.part0.m4s",INDEPENDENT=YES
            #EXT-X-PART:DURATION=1.0,URI="seg112.part1.m4s"
            #EXT-X-GAP
            #EXTINF:4.0,
            seg112.m4s
            #EXT-X-PART:DURATION=1.0,URI="seg113.part0.m4s",INDEPENDENT=YES
            #EXT-X-PRELOAD-HINT:TYPE=PART,URI="seg113.part1.m4s"
            #EXT-X-RENDITION-REPORT:URI="../720p/index.m3u8",LAST-MSN=112,LAST-PART=1
            #EXT-X-RENDITION-REPORT:URI="/live/1080p/index.m3u8",LAST-MSN=112,LAST-PART=0

            """,
        baseURL: base,
        expected: [
            .init(url: dir + "init.mp4", role: .map),
            .init(url: "https://keys.example.com/k?id=1", role: .key),
            .init(url: dir + "seg110.m4s", role: .segment),
            .init(url: dir + "seg111.m4s", role: .segment),
            .init(url: dir + "seg112.part0.m4s", role: .part),
            .init(url: dir + "seg112.part1.m4s", role: .part),
            .init(url: dir + "seg112.m4s", role: .segment),
            .init(url: dir + "seg113.part0.m4s", role: .part),
            .init(url: dir + "seg113.part1.m4s", role: .preloadHint),
            .init(url: "https://origin.example.com/live/720p/index.m3u8", role: .renditionReport),
            .init(url: "https://origin.example.com/live/1080p/index.m3u8", role: .renditionReport),
        ])

    /// Interstitials, DRM keys that must stay untouched, an AES-128 key given as `data:`, byte ranges with
    /// implicit offsets.
    static let interstitials = SamplePlaylist(
        name: "interstitials-drm-byteranges",
        text: """
            #EXTM3U
            #EXT-X-VERSION:7
            #EXT-X-TARGETDURATION:6
            #EXT-X-PLAYLIST-TYPE:VOD
            #EXT-X-DATERANGE:ID="ad1",CLASS="com.apple.hls.interstitial",START-DATE="2025-01-01T00:00:10.000Z",DURATION=15.0,X-ASSET-URI="ads/ad1/master.m3u8",X-RESUME-OFFSET=0
            #EXT-X-DATERANGE:ID="ad2",CLASS="com.apple.hls.interstitial",START-DATE="2025-01-01T00:00:20.000Z",X-ASSET-LIST="https://ads.example.com/list.json?slot=2",X-RESTRICT="SKIP,JUMP"
            #EXT-X-DATERANGE:ID="splice",START-DATE="2025-01-01T00:00:00.000Z",SCTE35-OUT=0xFC002F
            #EXT-X-KEY:METHOD=SAMPLE-AES,URI="skd://drm.example.com/asset",KEYFORMAT="com.apple.streamingkeydelivery",KEYFORMATVERSIONS="1"
            #EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI="data:text/plain;base64,AAAA",KEYFORMAT="urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed"
            #EXT-X-MAP:URI="main.mp4",BYTERANGE="720@0"
            #EXTINF:6.0,
            #EXT-X-BYTERANGE:1000@720
            main.mp4
            #EXTINF:6.0,
            #EXT-X-BYTERANGE:2000
            main.mp4
            #EXTINF:6.0,
            #EXT-X-BYTERANGE:1500
            main.mp4
            #EXT-X-KEY:METHOD=NONE
            #EXT-X-KEY:METHOD=AES-128,URI="data:text/plain;base64,AAECAwQFBgcICQoLDA0ODw==",IV=0x0102
            #EXTINF:6.0,
            other.ts
            #EXT-X-ENDLIST

            """,
        baseURL: base,
        expected: [
            .init(url: dir + "ads/ad1/master.m3u8", role: .interstitialAsset),
            .init(url: "https://ads.example.com/list.json?slot=2", role: .interstitialAssetList),
            .init(url: dir + "main.mp4", role: .map),
            .init(url: dir + "main.mp4", role: .segment),
            .init(url: dir + "main.mp4", role: .segment),
            .init(url: dir + "main.mp4", role: .segment),
            .init(url: dir + "other.ts", role: .segment),
        ])

    /// EXT-X-DEFINE with VALUE, QUERYPARAM (from the base URL) and IMPORT (from the caller).
    static let variables = SamplePlaylist(
        name: "variables",
        text: """
            #EXTM3U
            #EXT-X-VERSION:11
            #EXT-X-DEFINE:NAME="cdn",VALUE="https://cdn.example.com/v"
            #EXT-X-DEFINE:QUERYPARAM="token"
            #EXT-X-DEFINE:IMPORT="session"
            #EXT-X-TARGETDURATION:2
            #EXT-X-MAP:URI="{$cdn}/init.mp4?token={$token}"
            #EXTINF:2,
            {$cdn}/{$session}/seg1.m4s?token={$token}
            #EXTINF:2,
            ../{$session}/seg2.m4s
            #EXT-X-ENDLIST

            """,
        baseURL: base,
        imports: ["session": "s42"],
        expected: [
            .init(url: "https://cdn.example.com/v/init.mp4?token=abc", role: .map),
            .init(url: "https://cdn.example.com/v/s42/seg1.m4s?token=abc", role: .segment),
            .init(url: "https://origin.example.com/live/s42/seg2.m4s", role: .segment),
        ])

    /// An I-frame playlist: byte ranges into the main segments.
    static let iFrames = SamplePlaylist(
        name: "i-frames",
        text: """
            #EXTM3U
            #EXT-X-VERSION:4
            #EXT-X-TARGETDURATION:4
            #EXT-X-I-FRAMES-ONLY
            #EXTINF:4.0,
            #EXT-X-BYTERANGE:9400@564
            segment0.ts
            #EXTINF:4.0,
            #EXT-X-BYTERANGE:9400@200000
            segment0.ts
            #EXTINF:4.0,
            #EXT-X-BYTERANGE:7896@1128
            /other/segment1.ts
            #EXT-X-ENDLIST

            """,
        baseURL: "http://origin.example.com:8081/vod/a/b/iframes.m3u8",
        expected: [
            .init(url: "http://origin.example.com:8081/vod/a/b/segment0.ts", role: .segment),
            .init(url: "http://origin.example.com:8081/vod/a/b/segment0.ts", role: .segment),
            .init(url: "http://origin.example.com:8081/other/segment1.ts", role: .segment),
        ])

    /// What hand-made and odd packagers write: attribute order and spacing, lowercase hex, titles with commas,
    /// comments and unknown tags that look like URI-bearing ones (which must not be touched), dot segments,
    /// percent-encoding, fragments.
    static let oddFormatting = SamplePlaylist(
        name: "odd-formatting",
        text: """
            #EXTM3U
            # generated by hand; URI="comment.ts" is not a URI
            #EXT-X-TARGETDURATION:10
            #EXT-X-FOO:BAR="x,y",URI="unknown-tag.m3u8"
            #EXT-X-KEY:URI="k%20ey.bin" , METHOD=AES-128 ,IV=0x00ff
            #EXT-X-MAP:BYTERANGE="100@0",URI="./init/../init.mp4"

            #EXTINF:9.5,title, with a comma
            # a comment between EXTINF and its URI

            seg%2F1.ts#t=1
            #EXTINF:10,
            #EXT-X-UNKNOWN
            ?only=query
            #EXTINF:10,
            HTTPS://Other.Example.COM/a/./b/../c.ts
            #EXT-X-ENDLIST
            """,
        baseURL: "https://origin.example.com/p/q/list.m3u8?x=1#frag",
        expected: [
            .init(url: "https://origin.example.com/p/q/k%20ey.bin", role: .key),
            .init(url: "https://origin.example.com/p/q/init.mp4", role: .map),
            .init(url: "https://origin.example.com/p/q/seg%2F1.ts#t=1", role: .segment),
            .init(url: "https://origin.example.com/p/q/list.m3u8?only=query", role: .segment),
            .init(url: "HTTPS://Other.Example.COM/a/c.ts", role: .segment),
        ])

    static let all = [master, lowLatency, interstitials, variables, iFrames, oddFormatting]
}
