import Foundation
import HLSPlaylist
import Testing

/// Time-shift (``LiveRewind``): readings of a live playlist remembered, a later reading extended backwards by what is
/// still held. No I/O: the clock and what is held are given.
@Suite struct LiveRewindTests {
    static let base = "https://cdn.example.com/live/chan.m3u8"

    /// A live window of 1-second segments `first..<first+count`; `keyAt`: the key file in force from each listed
    /// sequence on (written before that segment); `discontinuityBefore`: sequences preceded by a discontinuity.
    static func window(
        _ first: UInt64, count: UInt64 = 4, discontinuitySequence: UInt64? = nil, keyAt: [UInt64: String] = [:],
        discontinuityBefore: Set<UInt64> = [], extraHeader: String = ""
    ) throws -> (Playlist, MediaPlaylist) {
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:\(first)\n"
        if let discontinuitySequence { text += "#EXT-X-DISCONTINUITY-SEQUENCE:\(discontinuitySequence)\n" }
        text += extraHeader
        for sequence in first..<(first + count) {
            if discontinuityBefore.contains(sequence) { text += "#EXT-X-DISCONTINUITY\n" }
            if let key = keyAt[sequence] {
                text += key == "NONE" ? "#EXT-X-KEY:METHOD=NONE\n" : "#EXT-X-KEY:METHOD=AES-128,URI=\"\(key)\"\n"
            }
            text += "#EXT-X-PROGRAM-DATE-TIME:2026-11-28T10:00:\(String(format: "%02d", sequence % 60)).000Z\n"
            text += "#EXTINF:1.000,\nseg\(sequence).ts\n"
        }
        let playlist = try Playlist(text)
        return (playlist, try playlist.media(baseURL: base))
    }

    static func extended(_ rewind: LiveRewind, _ reading: (Playlist, MediaPlaylist), held: (UInt64) -> Bool = { _ in true }) throws
        -> MediaPlaylist?
    {
        guard let bytes = rewind.extending(reading.0, media: reading.1, isHeld: { held($0.sequence) }) else { return nil }
        return try Playlist(bytes: bytes).media(baseURL: base)
    }

    @Test func aSlidWindowIsListedBeforeTheCurrentOneWithItsKeysDatesAndSequenceNumbers() throws {
        var rewind = LiveRewind(keep: 3600, maxEntries: 100)
        let first = try Self.window(10, keyAt: [10: "k1.key", 12: "k2.key"])
        rewind.observe(first.0, media: first.1, now: 0)
        let second = try Self.window(12, keyAt: [12: "k2.key", 14: "k3.key"])
        rewind.observe(second.0, media: second.1, now: 2)
        let current = try Self.window(16, keyAt: [16: "k3.key"])
        rewind.observe(current.0, media: current.1, now: 4)

        let media = try #require(try Self.extended(rewind, current))
        #expect(media.mediaSequence == 10 && media.isLive)
        #expect(media.segments.map(\.mediaSequence) == Array(10...19))
        #expect(media.segments.map(\.uri) == (10...19).map { "seg\($0).ts" })
        let keys = media.segments.map { $0.key?.uri ?? "-" }
        #expect(keys == ["k1.key", "k1.key", "k2.key", "k2.key", "k3.key", "k3.key", "k3.key", "k3.key", "k3.key", "k3.key"])
        // Without an IV, AES-128 uses the media sequence number: it is kept, so the IVs are the origin's.
        #expect(media.segments[0].aes128IV == [UInt8](repeating: 0, count: 15) + [10])
        #expect(media.segments.allSatisfy { $0.programDateTime != nil && $0.duration == 1 })
        #expect(media.segments.allSatisfy { !$0.isDiscontinuity })
        // The window itself as the origin wrote it, after what is held.
        let text = String(decoding: rewind.extending(current.0, media: current.1, isHeld: { _ in true })!, as: UTF8.self)
        #expect(
            text.hasSuffix(
                String(
                    decoding: current.0.bytes.suffix(from: current.0.lines[current.1.segments[0].line - 4].range.lowerBound), as: UTF8.self)
            ))
    }

    @Test func onlyTheConsecutiveRunOfHeldSegmentsRightBeforeTheWindowIsListed() throws {
        var rewind = LiveRewind(keep: 3600, maxEntries: 100)
        for first: UInt64 in [10, 14, 18] {
            let reading = try Self.window(first)
            rewind.observe(reading.0, media: reading.1, now: Double(first))
        }
        let current = try Self.window(20)
        rewind.observe(current.0, media: current.1, now: 20)
        // 13 was evicted: 14…19 are listed, nothing older (no hole in the middle).
        let media = try #require(try Self.extended(rewind, current) { $0 != 13 })
        #expect(media.segments.map(\.mediaSequence) == Array(14...23))
        // Nothing held right before the window: nil, the reading is served as it is.
        #expect(try Self.extended(rewind, current) { $0 != 19 } == nil)
    }

    @Test func segmentsNeverSeenLeaveNoHoleAndOldOnesAreForgotten() throws {
        var rewind = LiveRewind(keep: 60, maxEntries: 100)
        let early = try Self.window(10)
        rewind.observe(early.0, media: early.1, now: 0)
        // Nobody read the playlist while 14…29 were listed: what is remembered does not reach the window.
        let later = try Self.window(30)
        rewind.observe(later.0, media: later.1, now: 20)
        #expect(try Self.extended(rewind, later) == nil)
        // Kept `keep` seconds after a reading last listed it, then forgotten.
        let next = try Self.window(34)
        rewind.observe(next.0, media: next.1, now: 70)
        #expect(try Self.extended(rewind, next)?.segments.first?.mediaSequence == 30)
        let afterKeep = try Self.window(38)
        rewind.observe(afterKeep.0, media: afterKeep.1, now: 81)
        #expect(rewind.entries.first?.sequence == 34)
        #expect(try Self.extended(rewind, afterKeep)?.segments.first?.mediaSequence == 34)
    }

    @Test func discontinuitiesKeepTheirNumbers() throws {
        var rewind = LiveRewind(keep: 3600, maxEntries: 100)
        let first = try Self.window(10, discontinuitySequence: 3, discontinuityBefore: [12])
        rewind.observe(first.0, media: first.1, now: 0)
        // The origin's window moved past the break: its first segment is number 4, no tag before it.
        let current = try Self.window(14, discontinuitySequence: 4, discontinuityBefore: [16])
        rewind.observe(current.0, media: current.1, now: 4)
        let media = try #require(try Self.extended(rewind, current))
        #expect(media.segments.map(\.mediaSequence) == Array(10...17))
        #expect(media.segments.map(\.discontinuitySequence) == [3, 3, 4, 4, 4, 4, 5, 5])
        #expect(media.segments.map(\.isDiscontinuity) == [false, false, true, false, false, false, true, false])
        // The same when the window did not say its number (0) but the held ones had one.
        var plain = LiveRewind(keep: 3600, maxEntries: 100)
        let a = try Self.window(10, discontinuityBefore: [12])
        plain.observe(a.0, media: a.1, now: 0)
        let b = try Self.window(12, discontinuitySequence: 1)
        plain.observe(b.0, media: b.1, now: 2)
        let extended = try #require(try Self.extended(plain, b))
        #expect(extended.segments.map(\.discontinuitySequence) == [0, 0, 1, 1, 1, 1])
    }

    @Test func aClearWindowAfterEncryptedHeldSegmentsSaysSo() throws {
        var rewind = LiveRewind(keep: 3600, maxEntries: 100)
        let first = try Self.window(10, keyAt: [10: "k1.key"])
        rewind.observe(first.0, media: first.1, now: 0)
        let current = try Self.window(14)
        rewind.observe(current.0, media: current.1, now: 4)
        let media = try #require(try Self.extended(rewind, current))
        #expect(media.segments.map { $0.key?.uri ?? "-" } == ["k1.key", "k1.key", "k1.key", "k1.key", "-", "-", "-", "-"])
    }

    @Test func anEncoderThatStartsAgainStartsTheMemoryOver() throws {
        var rewind = LiveRewind(keep: 3600, maxEntries: 100)
        let before = try Self.window(100)
        rewind.observe(before.0, media: before.1, now: 0)
        let again = try Self.window(0)
        rewind.observe(again.0, media: again.1, now: 1)
        #expect(rewind.entries.map(\.sequence) == [0, 1, 2, 3])
        let next = try Self.window(2)
        rewind.observe(next.0, media: next.1, now: 3)
        #expect(try Self.extended(rewind, next)?.segments.map(\.mediaSequence) == [0, 1, 2, 3, 4, 5])
    }

    @Test func memoryIsBoundedAndDeltaUpdatesAndEndedPlaylistsAreNotExtended() throws {
        var rewind = LiveRewind(keep: 3600, maxEntries: 6)
        for first in stride(from: UInt64(0), through: 40, by: 4) {
            let reading = try Self.window(first)
            rewind.observe(reading.0, media: reading.1, now: Double(first))
        }
        #expect(rewind.entries.map(\.sequence) == Array(38...43))
        let current = try Self.window(42)
        #expect(try Self.extended(rewind, current)?.segments.first?.mediaSequence == 38)
        // A delta update (EXT-X-SKIP) lists fewer than it means: neither read nor extended.
        let delta = try Playlist(
            "#EXTM3U\n#EXT-X-VERSION:9\n#EXT-X-TARGETDURATION:1\n#EXT-X-SERVER-CONTROL:CAN-SKIP-UNTIL=6\n#EXT-X-MEDIA-SEQUENCE:42\n#EXT-X-SKIP:SKIPPED-SEGMENTS=2\n#EXTINF:1,\nseg44.ts\n"
        )
        let deltaMedia = try delta.media(baseURL: Self.base)
        #expect(rewind.extending(delta, media: deltaMedia, isHeld: { _ in true }) == nil)
        let ended = try Playlist("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:42\n#EXTINF:1,\nseg42.ts\n#EXT-X-ENDLIST\n")
        #expect(rewind.extending(ended, media: try ended.media(baseURL: Self.base), isHeld: { _ in true }) == nil)
    }
}
