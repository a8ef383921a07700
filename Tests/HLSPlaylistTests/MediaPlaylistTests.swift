import Foundation
import HLSPlaylist
import HLSTestSupport
import Testing

/// The timeline view: start times, sequence numbers, byte ranges, keys, IVs, maps, LL-HLS parts.
@Suite struct MediaPlaylistTests {
    static func media(_ name: String) throws -> MediaPlaylist {
        try Playlist(try Fixtures.text(name)).media(baseURL: Fixtures.baseURL(name))
    }

    @Test func clearTSFixture() throws {
        let media = try Self.media("clear-ts.m3u8")
        #expect(media.version == 3)
        #expect(media.targetDuration == 2)
        #expect(media.playlistType == .vod)
        #expect(media.hasEndList && !media.isLive)
        #expect(media.segments.map(\.startTime) == [0, 2, 4, 6])
        #expect(media.segments.map(\.mediaSequence) == [0, 1, 2, 3])
        #expect(media.segments.map(\.index) == [0, 1, 2, 3])
        #expect(media.segments.map(\.uri) == ["seg_000.ts", "seg_001.ts", "seg_002.ts", "seg_003.ts"])
        #expect(media.segments[2].url == "https://cdn.example.com/vod/show/seg_002.ts")
        #expect(media.segments[2].line == 11)
        #expect(media.totalDuration == 8)
        #expect(media.segments.allSatisfy { $0.key == nil && $0.aes128IV == nil && $0.map == nil && $0.byteRange == nil })
    }

    @Test func liveWindowFixture() throws {
        let media = try Self.media("live-window.m3u8")
        #expect(media.isLive)
        #expect(media.playlistType == nil)
        #expect(media.mediaSequence == 2)
        #expect(media.segments.map(\.mediaSequence) == [2, 3, 4])
        #expect(media.segments.map(\.uri) == ["seg_002.ts", "seg_003.ts", "seg_004.ts"])
        #expect(media.segments.map(\.startTime) == [0, 2, 4])
    }

    @Test func eventFixture() throws {
        let media = try Self.media("event.m3u8")
        #expect(media.playlistType == .event)
        #expect(media.segments.count == 3)
    }

    @Test func keyRotationFixture() throws {
        let media = try Self.media("aes128-rotation.m3u8")
        #expect(media.segments.count == 6)
        let keyURLs = media.segments.map { $0.key?.url }
        #expect(keyURLs == [1, 1, 2, 2, 3, 3].map { "https://keys.example.com/key\($0).bin" })
        #expect(Set(keyURLs).count == 3)
        for segment in media.segments {
            let key = try #require(segment.key)
            #expect(key.method == .aes128)
            #expect(key.keyFormat == "identity")
            #expect(segment.keys == [key])
            // ffmpeg writes the sequence number as an explicit IV.
            #expect(key.iv == [UInt8](repeating: 0, count: 15) + [UInt8(segment.mediaSequence)])
            #expect(segment.aes128IV == [UInt8](repeating: 0, count: 15) + [UInt8(segment.mediaSequence)])
        }
    }

    @Test func fmp4Fixture() throws {
        let media = try Self.media("fmp4.m3u8")
        #expect(media.version == 7)
        #expect(media.segments.count == 4)
        for segment in media.segments {
            #expect(segment.map?.uri == "init.mp4")
            #expect(segment.map?.url == "https://cdn.example.com/vod/show/init.mp4")
            #expect(segment.map?.byteRange == nil)
        }
    }

    @Test func singleFileFixtureOffsetsChain() throws {
        let media = try Self.media("single-file.m3u8")
        #expect(media.segments.count == 5)
        var expectedOffset: UInt64 = 0
        for segment in media.segments {
            let range = try #require(segment.byteRange)
            #expect(range.offset == expectedOffset)
            #expect(range.length > 0)
            #expect(segment.url == "https://cdn.example.com/vod/show/single-file.ts")
            expectedOffset = range.offset + range.length
        }
        #expect(media.segments[0].byteRange == ByteRange(length: 177_660, offset: 0))
        #expect(media.segments[0].byteRange?.httpRange == "bytes=0-177659")
    }

    /// The same playlist with every `@offset` after the first removed gives the same ranges.
    @Test func implicitOffsetsEqualExplicitOnes() throws {
        let text = try Fixtures.text("single-file.m3u8")
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var first = true
        for k in lines.indices where lines[k].hasPrefix("#EXT-X-BYTERANGE:") {
            if first {
                first = false
                continue
            }
            lines[k] = String(lines[k].prefix { $0 != "@" })
        }
        let implicit = lines.joined(separator: "\n")
        #expect(implicit != text)
        let a = try Playlist(text).media().segments.map(\.byteRange)
        let b = try Playlist(implicit).media().segments.map(\.byteRange)
        #expect(a == b)
    }

    @Test func segmentsStartingBefore() throws {
        let rotation = try Self.media("aes128-rotation.m3u8")
        #expect(rotation.segments(startingBefore: 10).map(\.uri) == ["seg_000.ts", "seg_001.ts", "seg_002.ts", "seg_003.ts", "seg_004.ts"])
        #expect(rotation.segments(startingBefore: 0).count == 6)
        #expect(rotation.segments(startingBefore: 0.001).count == 1)
        #expect(rotation.segments(startingBefore: 1_000).count == 6)

        var text = "#EXTM3U\n#EXT-X-TARGETDURATION:4\n"
        for k in 0..<8 { text += "#EXTINF:3.3,\ns\(k).ts\n" }
        let media = try Playlist(text).media()
        let picked = media.segments(startingBefore: 10)
        #expect(picked.count == media.segments.filter { $0.startTime < 10 }.count)
        #expect(picked.count == 4)
        #expect(picked.allSatisfy { $0.startTime < 10 })

        for name in Fixtures.names where name != "master.m3u8" {
            let segments = try Self.media(name).segments
            #expect(Array(try Self.media(name).segments(startingBefore: 10)) == segments.filter { $0.startTime < 10 }, "\(name)")
        }
    }

    @Test func lowLatencyTimeline() throws {
        let sample = SamplePlaylists.lowLatency
        let media = try Playlist(sample.text).media(baseURL: sample.baseURL)
        #expect(media.mediaSequence == 100)
        #expect(media.skippedSegments == 10)
        #expect(media.segments.map(\.mediaSequence) == [110, 111, 112])
        #expect(media.segments.map(\.startTime) == [0, 4, 8])
        #expect(media.segments.map(\.discontinuitySequence) == [5, 6, 6])
        #expect(media.segments.map(\.isDiscontinuity) == [false, true, false])
        #expect(media.segments.map(\.isGap) == [false, false, true])
        #expect(media.segments.map(\.bitrate) == [nil, 2000, 2000])
        #expect(media.segments.map(\.programDateTime) == ["2025-01-01T00:00:40.000Z", nil, nil])
        #expect(media.segments.allSatisfy { $0.map?.url == SamplePlaylists.dir + "init.mp4" })
        #expect(media.segments.allSatisfy { $0.key?.url == "https://keys.example.com/k?id=1" })
        #expect(media.segments[1].aes128IV == [UInt8](repeating: 0, count: 15) + [111])

        #expect(media.partTargetDuration == 1.0)
        let control = try #require(media.serverControl)
        #expect(control.canBlockReload)
        #expect(control.canSkipUntil == 24)
        #expect(control.partHoldBack == 3)
        #expect(control.holdBack == nil)
        #expect(!control.canSkipDateRanges)

        #expect(media.parts.map(\.uri) == ["seg112.part0.m4s", "seg112.part1.m4s", "seg113.part0.m4s"])
        #expect(media.parts.map(\.mediaSequence) == [112, 112, 113])
        #expect(media.parts.map(\.partIndex) == [0, 1, 0])
        #expect(media.parts.map(\.isIndependent) == [true, false, true])
        #expect(media.parts.map(\.duration) == [1, 1, 1])
        #expect(media.preloadHints.map(\.type) == ["PART"])
        #expect(media.preloadHints.map(\.url) == [SamplePlaylists.dir + "seg113.part1.m4s"])
        #expect(media.preloadHints.map(\.byteRangeStart) == [nil])
        #expect(
            media.renditionReports.map(\.url) == [
                "https://origin.example.com/live/720p/index.m3u8", "https://origin.example.com/live/1080p/index.m3u8",
            ])
        #expect(media.renditionReports.map(\.lastMediaSequence) == [112, 112])
        #expect(media.renditionReports.map(\.lastPart) == [1, 0])
    }

    @Test func interstitialsKeysAndByteRanges() throws {
        let sample = SamplePlaylists.interstitials
        let media = try Playlist(sample.text).media(baseURL: sample.baseURL)
        #expect(media.dateRanges.map(\.id) == ["ad1", "ad2", "splice"])
        #expect(media.dateRanges[0].assetURL == SamplePlaylists.dir + "ads/ad1/master.m3u8")
        #expect(media.dateRanges[0].duration == 15)
        #expect(media.dateRanges[0].class == "com.apple.hls.interstitial")
        #expect(media.dateRanges[1].assetListURL == "https://ads.example.com/list.json?slot=2")
        #expect(media.dateRanges[1].attributes["X-RESTRICT"] == "SKIP,JUMP")
        #expect(media.dateRanges[2].assetURL == nil && media.dateRanges[2].assetListURL == nil)

        #expect(
            media.segments.map(\.byteRange) == [
                ByteRange(length: 1000, offset: 720), ByteRange(length: 2000, offset: 1720), ByteRange(length: 1500, offset: 3720), nil,
            ])
        let map = try #require(media.segments[0].map)
        #expect(map.byteRange == ByteRange(length: 720, offset: 0))

        // Two DRM systems at once: both in force, neither is the identity key, no AES-128 IV.
        let drm = media.segments[0]
        #expect(drm.keys.map(\.method) == [.sampleAES, .sampleAESCTR])
        #expect(drm.keys[0].uri == "skd://drm.example.com/asset")
        #expect(drm.keys[0].url == "skd://drm.example.com/asset")
        #expect(drm.key == nil)
        #expect(drm.aes128IV == nil)
        // METHOD=NONE clears them; the AES-128 key that follows has an explicit short IV, left-padded.
        let last = media.segments[3]
        #expect(last.keys.count == 1)
        #expect(last.key?.method == .aes128)
        #expect(last.aes128IV == [UInt8](repeating: 0, count: 14) + [0x01, 0x02])
    }

    @Test func implicitIVIsTheMediaSequenceNumberBigEndian() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-MEDIA-SEQUENCE:4294967298
            #EXT-X-KEY:METHOD=AES-128,URI="k.bin"
            #EXTINF:4,
            a.ts
            #EXTINF:4,
            b.ts
            #EXT-X-KEY:METHOD=AES-128,URI="k2.bin",IV=0X000102030405060708090A0B0C0D0E0F
            #EXTINF:4,
            c.ts
            #EXT-X-KEY:METHOD=NONE
            #EXTINF:4,
            d.ts

            """
        let segments = try Playlist(text).media(baseURL: "https://h/p/list.m3u8").segments
        #expect(segments.map(\.mediaSequence) == [4_294_967_298, 4_294_967_299, 4_294_967_300, 4_294_967_301])
        #expect(segments[0].aes128IV == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2])
        #expect(segments[1].aes128IV == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 3])
        #expect(segments[1].key?.url == "https://h/p/k.bin")
        #expect(segments[2].aes128IV == Array(0...15))
        #expect(segments[2].key?.url == "https://h/p/k2.bin")
        #expect(segments[3].key == nil && segments[3].keys.isEmpty && segments[3].aes128IV == nil)
    }

    @Test func mapInForceUntilTheNextOne() throws {
        let text = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXTINF:4,
            plain.ts
            #EXT-X-MAP:URI="init1.mp4"
            #EXTINF:4,
            a.m4s
            #EXTINF:4,
            b.m4s
            #EXT-X-DISCONTINUITY
            #EXT-X-MAP:URI="init2.mp4",BYTERANGE="500@100"
            #EXTINF:4,
            c.m4s

            """
        let segments = try Playlist(text).media().segments
        #expect(segments.map { $0.map?.uri } == [nil, "init1.mp4", "init1.mp4", "init2.mp4"])
        #expect(segments[3].map?.byteRange == ByteRange(length: 500, offset: 100))
        #expect(segments.map(\.discontinuitySequence) == [0, 0, 0, 1])
    }

    @Test func iFramePlaylist() throws {
        let sample = SamplePlaylists.iFrames
        let media = try Playlist(sample.text).media(baseURL: sample.baseURL)
        #expect(media.isIFramesOnly)
        #expect(
            media.segments.map(\.byteRange) == [
                ByteRange(length: 9400, offset: 564), ByteRange(length: 9400, offset: 200_000), ByteRange(length: 7896, offset: 1128),
            ])
        #expect(media.segments[2].url == "http://origin.example.com:8081/other/segment1.ts")
    }

    @Test func titlesAndStart() throws {
        let text =
            "#EXTM3U\n#EXT-X-START:TIME-OFFSET=-12.5,PRECISE=YES\n#EXT-X-TARGETDURATION:10\n#EXTINF:9.5,title, with a comma\nseg.ts\n"
        let media = try Playlist(text).media()
        #expect(media.start?.timeOffset == -12.5)
        #expect(media.start?.precise == true)
        #expect(media.segments[0].title == "title, with a comma")
        #expect(media.segments[0].duration == 9.5)
        #expect(media.segments[0].url == "seg.ts")
    }
}
