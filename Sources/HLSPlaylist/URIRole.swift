/// What a URI in a playlist points at. The rewrite closure gets it with every URI so that the proxy can
/// route keys, playlists and media differently.
public enum URIRole: String, Sendable, Hashable, CaseIterable {
    /// The URI line after `#EXT-X-STREAM-INF` (a media playlist).
    case variant
    /// `URI=` on `#EXT-X-MEDIA` (an alternative rendition's media playlist).
    case rendition
    /// `URI=` on `#EXT-X-I-FRAME-STREAM-INF`.
    case iFramePlaylist
    /// A media segment URI line.
    case segment
    /// `URI=` on `#EXT-X-KEY`.
    case key
    /// `URI=` on `#EXT-X-SESSION-KEY`.
    case sessionKey
    /// `URI=` on `#EXT-X-MAP` (an init section).
    case map
    /// `URI=` on `#EXT-X-PART` (LL-HLS partial segment).
    case part
    /// `URI=` on `#EXT-X-PRELOAD-HINT`.
    case preloadHint
    /// `URI=` on `#EXT-X-RENDITION-REPORT` (another rendition's media playlist).
    case renditionReport
    /// `URI=` on `#EXT-X-SESSION-DATA` (a JSON document).
    case sessionData
    /// `SERVER-URI=` on `#EXT-X-CONTENT-STEERING` (a steering manifest).
    case steeringServer
    /// `X-ASSET-URI=` on an interstitial `#EXT-X-DATERANGE` (a playlist).
    case interstitialAsset
    /// `X-ASSET-LIST=` on an interstitial `#EXT-X-DATERANGE` (a JSON asset list).
    case interstitialAssetList
    /// `URI=` on `#EXT-X-IMAGE-STREAM-INF` (a playlist of thumbnail tiles).
    case imagePlaylist

    /// A dense index for per-role tables.
    var ordinal: Int {
        switch self {
        case .variant: 0
        case .rendition: 1
        case .iFramePlaylist: 2
        case .segment: 3
        case .key: 4
        case .sessionKey: 5
        case .map: 6
        case .part: 7
        case .preloadHint: 8
        case .renditionReport: 9
        case .sessionData: 10
        case .steeringServer: 11
        case .interstitialAsset: 12
        case .interstitialAssetList: 13
        case .imagePlaylist: 14
        }
    }

    /// Whether the resource is itself a playlist that the proxy should rewrite in turn.
    public var isPlaylist: Bool {
        switch self {
        case .variant, .rendition, .iFramePlaylist, .renditionReport, .interstitialAsset, .imagePlaylist: return true
        default: return false
        }
    }
}
