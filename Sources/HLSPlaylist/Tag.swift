/// The tags the engine understands. Anything else is ``unknown`` and is carried through untouched.
public enum Tag: String, Sendable, Hashable, CaseIterable {
    case extm3u = "EXTM3U"
    case version = "EXT-X-VERSION"
    case independentSegments = "EXT-X-INDEPENDENT-SEGMENTS"
    case start = "EXT-X-START"
    case define = "EXT-X-DEFINE"
    // Media playlist tags
    case inf = "EXTINF"
    case targetDuration = "EXT-X-TARGETDURATION"
    case mediaSequence = "EXT-X-MEDIA-SEQUENCE"
    case discontinuitySequence = "EXT-X-DISCONTINUITY-SEQUENCE"
    case endList = "EXT-X-ENDLIST"
    case playlistType = "EXT-X-PLAYLIST-TYPE"
    case iFramesOnly = "EXT-X-I-FRAMES-ONLY"
    case partInf = "EXT-X-PART-INF"
    case serverControl = "EXT-X-SERVER-CONTROL"
    case byteRange = "EXT-X-BYTERANGE"
    case discontinuity = "EXT-X-DISCONTINUITY"
    case key = "EXT-X-KEY"
    case map = "EXT-X-MAP"
    case programDateTime = "EXT-X-PROGRAM-DATE-TIME"
    case gap = "EXT-X-GAP"
    case bitrate = "EXT-X-BITRATE"
    case part = "EXT-X-PART"
    case dateRange = "EXT-X-DATERANGE"
    case skip = "EXT-X-SKIP"
    case preloadHint = "EXT-X-PRELOAD-HINT"
    case renditionReport = "EXT-X-RENDITION-REPORT"
    case allowCache = "EXT-X-ALLOW-CACHE"
    // Master (multivariant) playlist tags
    case media = "EXT-X-MEDIA"
    case streamInf = "EXT-X-STREAM-INF"
    case iFrameStreamInf = "EXT-X-I-FRAME-STREAM-INF"
    case sessionData = "EXT-X-SESSION-DATA"
    case sessionKey = "EXT-X-SESSION-KEY"
    case contentSteering = "EXT-X-CONTENT-STEERING"
    /// Thumbnail tracks (Roku, the DASH-IF image-track convention for HLS): a playlist of image tiles.
    case imageStreamInf = "EXT-X-IMAGE-STREAM-INF"
    case unknown = ""

    /// Which kind of playlist a tag proves the file to be.
    enum Scope { case any, master, media }

    var scope: Scope {
        switch self {
        case .extm3u, .version, .independentSegments, .start, .define, .unknown: return .any
        case .media, .streamInf, .iFrameStreamInf, .sessionData, .sessionKey, .contentSteering, .imageStreamInf: return .master
        // EXT-X-ALLOW-CACHE was removed from the spec; old packagers put it in both kinds.
        case .allowCache: return .any
        default: return .media
        }
    }

    /// Tags whose value is an attribute list.
    var hasAttributeList: Bool {
        switch self {
        case .start, .define, .partInf, .serverControl, .key, .map, .part, .dateRange, .skip, .preloadHint, .renditionReport,
            .media, .streamInf, .iFrameStreamInf, .sessionData, .sessionKey, .contentSteering, .imageStreamInf:
            return true
        default: return false
        }
    }

    private static let table: [(name: [UInt8], tag: Tag)] = Tag.allCases.filter { $0 != .unknown }
        .map { (Array($0.rawValue.utf8), $0) }
        // Most lines of a media playlist are EXTINF; try it first.
        .sorted { a, b in a.tag == .inf && b.tag != .inf }

    /// Looks up the tag whose name is `bytes[start..<end]` (without `#` and `:`).
    static func lookup(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> Tag {
        let n = end - start
        outer: for entry in table where entry.name.count == n {
            for k in 0..<n where entry.name[k] != bytes[start + k] { continue outer }
            return entry.tag
        }
        return .unknown
    }
}
