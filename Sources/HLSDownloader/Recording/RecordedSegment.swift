import Foundation
import HLSPlaylist

/// One segment a recording stored (or a run of segments it missed), in origin form: absolute URLs, its own key and
/// init section, so the recorded playlist can be written from these rows alone (``RecordingPlaylist``). A row of
/// `item_recording`.
package struct RecordedSegment: Sendable, Hashable, Codable {
    /// The origin's media sequence number.
    package var sequence: UInt64
    package var duration: Double
    package var title: String
    /// The absolute origin URL.
    package var url: String
    /// `EXT-X-BYTERANGE` length and offset.
    package var byteRange: [UInt64]?
    /// Whether the origin put an `EXT-X-DISCONTINUITY` before it.
    package var discontinuity: Bool
    /// `EXT-X-PROGRAM-DATE-TIME` as the origin wrote it.
    package var programDateTime: String?
    /// The keys in force (any method but NONE), with the IV the segment decrypts with.
    package var keys: [RecordedKey]
    /// The init section (`EXT-X-MAP`): absolute URL, and byte range length and offset.
    package var mapURL: String?
    package var mapRange: [UInt64]?
    /// Segments missed just before this one (origin errors, a restart of hlscache): a gap in the recording.
    package var missedBefore: Int

    /// The segment as a row of the recording, from the origin's playlist.
    package init(_ segment: Segment, missedBefore: Int = 0) {
        sequence = segment.mediaSequence
        duration = segment.duration
        title = segment.title
        url = segment.url
        byteRange = segment.byteRange.map { [$0.length, $0.offset] }
        discontinuity = segment.isDiscontinuity
        programDateTime = segment.programDateTime
        keys = segment.keys.map { key in
            // Without an explicit IV, AES-128 uses the media sequence number, which the recorded playlist does not
            // keep (its numbers restart and skip gaps): written explicitly.
            let iv = key.iv ?? (key.method == .aes128 ? Self.sequenceIV(segment.mediaSequence) : nil)
            return RecordedKey(
                method: key.method.name, url: key.url ?? key.uri ?? "", iv: iv.map(Self.hex), keyFormat: key.keyFormat,
                keyFormatVersions: key.keyFormatVersions)
        }
        mapURL = segment.map?.url
        mapRange = segment.map?.byteRange.map { [$0.length, $0.offset] }
        self.missedBefore = missedBefore
    }

    static func sequenceIV(_ sequence: UInt64) -> [UInt8] {
        var iv = [UInt8](repeating: 0, count: 8)
        for shift in stride(from: 56, through: 0, by: -8) { iv.append(UInt8(truncatingIfNeeded: sequence >> UInt64(shift))) }
        return iv
    }

    static func hex(_ bytes: [UInt8]) -> String {
        "0x" + bytes.map { String(format: "%02x", $0) }.joined()
    }
}

/// A key of a recorded segment.
package struct RecordedKey: Sendable, Hashable, Codable {
    package var method: String
    package var url: String
    /// `0x…`, explicit.
    package var iv: String?
    package var keyFormat: String
    package var keyFormatVersions: String?
}
