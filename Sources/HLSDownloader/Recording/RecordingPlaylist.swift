import Foundation

/// The media playlist of what a recording stored for one rendition (pure: rows in, text out), in origin form —
/// absolute URLs, rewritten through the proxy by the caller as any stored playlist.
///
/// `EXT-X-PLAYLIST-TYPE:EVENT` while the recording grows (players reload it and may start anywhere), `VOD` with
/// `EXT-X-ENDLIST` once it ended. The origin's discontinuities and program date-times are kept; each segment's key
/// is written when it changes, with its IV explicit (the playlist's own sequence numbers are not the origin's);
/// the init section likewise. Segments that were missed are not listed: the next segment gets an
/// `EXT-X-DISCONTINUITY` (its timestamps do not follow the previous one's) and a comment saying how many were
/// missed. Not `EXT-X-GAP`: it needs the missing segment's URI listed, and ffmpeg (5.x) does not know the tag — it
/// requests the segment, fails and waits; a discontinuity plays on in ffmpeg, hls.js, Shaka, VLC and mpv.
package enum RecordingPlaylist {
    /// The playlist text.
    /// - Parameters:
    ///   - segments: the rows in recording order.
    ///   - ended: the recording ended: `VOD` and `EXT-X-ENDLIST`.
    package static func text(_ segments: [RecordedSegment], ended: Bool) -> String {
        let target = max(1, Int((segments.map(\.duration).max() ?? 1).rounded(.up)))
        let version = segments.contains { $0.mapURL != nil } ? 6 : segments.contains { $0.byteRange != nil } ? 4 : 3
        var lines = [
            "#EXTM3U", "#EXT-X-VERSION:\(version)", "#EXT-X-TARGETDURATION:\(target)", "#EXT-X-MEDIA-SEQUENCE:0",
            "#EXT-X-PLAYLIST-TYPE:\(ended ? "VOD" : "EVENT")",
        ]
        var keys: [RecordedKey]? = nil
        var map: (String?, [UInt64]?) = (nil, nil)
        for (index, segment) in segments.enumerated() {
            if segment.missedBefore > 0 && index > 0 {
                lines.append("# hlscache: \(segment.missedBefore) segment(s) missed here")
            }
            if index > 0 && (segment.discontinuity || segment.missedBefore > 0) { lines.append("#EXT-X-DISCONTINUITY") }
            if keys != segment.keys {
                if segment.keys.isEmpty {
                    if keys != nil { lines.append("#EXT-X-KEY:METHOD=NONE") }
                } else {
                    for key in segment.keys { lines.append(keyLine(key)) }
                }
                keys = segment.keys
            }
            if segment.mapURL != map.0 || segment.mapRange != map.1, let url = segment.mapURL {
                var line = "#EXT-X-MAP:URI=\"\(url)\""
                if let range = segment.mapRange, range.count == 2 { line += ",BYTERANGE=\"\(range[0])@\(range[1])\"" }
                lines.append(line)
                map = (segment.mapURL, segment.mapRange)
            }
            if let date = segment.programDateTime { lines.append("#EXT-X-PROGRAM-DATE-TIME:\(date)") }
            lines.append("#EXTINF:\(decimal(segment.duration)),\(segment.title)")
            if let range = segment.byteRange, range.count == 2 { lines.append("#EXT-X-BYTERANGE:\(range[0])@\(range[1])") }
            lines.append(segment.url)
        }
        if ended { lines.append("#EXT-X-ENDLIST") }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func keyLine(_ key: RecordedKey) -> String {
        var line = "#EXT-X-KEY:METHOD=\(key.method),URI=\"\(key.url)\""
        if let iv = key.iv { line += ",IV=\(iv)" }
        if key.keyFormat != "identity" { line += ",KEYFORMAT=\"\(key.keyFormat)\"" }
        if let versions = key.keyFormatVersions { line += ",KEYFORMATVERSIONS=\"\(versions)\"" }
        return line
    }

    /// A duration as the origin would write it: no exponent, at most six decimals, no trailing zeros.
    static func decimal(_ value: Double) -> String {
        var text = String(format: "%.6f", value)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }
}
