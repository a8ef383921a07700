/// How ``ResourceService`` answers a request the cache does not have: decided from the request and the download in
/// flight for its key, without I/O, so every branch is unit-tested (`MissRouteTests`).
enum MissRoute: Equatable, Sendable {
    /// The download in flight has the range's first byte (in memory or in its temp file): the client joins it for
    /// bytes `first...last`.
    case joinRange(first: Int64, last: Int64)
    /// The download in flight knows the size, and the range lies beyond it: 416.
    case rangeNotSatisfiable(size: Int64)
    /// A range of a cacheable resource with no download in flight: the slices it covers (Slices/), or a relay and a
    /// background fill.
    case rangeFromSlices
    /// Relayed from the origin and not stored: a range of a request that is not stored (an LL-HLS blocking reload), or
    /// one the download in flight does not have yet (that download fills the cache; no slices, no second fill).
    case rangeRelay
    /// The whole resource through its shared download; `trySlices`: first see whether it is stored as slices (a
    /// cacheable media object with no download in flight).
    case whole(trySlices: Bool)

    /// What the download in flight for the key has, as far as serving a range goes.
    struct InFlight: Equatable, Sendable {
        /// The body's length, once the head is known and it is media (nil: unknown, not known yet, or a playlist).
        var mediaLength: Int64?
        /// Body bytes received so far.
        var received: Int64
        /// The first byte a client joining now can be sent (bytes before it left memory and are not on disk).
        var servableFrom: Int64
        var failed: Bool
    }

    /// - Parameters:
    ///   - range: the request's `Range` header.
    ///   - pathExtension: the origin URL's; a playlist's path is always answered whole.
    ///   - cacheable: false for requests that are not stored (LL-HLS blocking reloads).
    ///   - inFlight: the download in flight under the request's fetch key, if any.
    static func decide(range: String?, isHead: Bool, pathExtension: String?, cacheable: Bool, inFlight: InFlight?) -> MissRoute {
        // A playlist is always answered whole and rewritten: a byte range of the origin's raw playlist would hand the
        // player unrewritten URIs (ffmpeg asks for "bytes=0-" on every request). Servers may ignore Range.
        let looksLikePlaylist = MediaTypes.isPlaylist(contentType: nil, pathExtension: pathExtension)
        guard let range, !isHead, !looksLikePlaylist, !RangeRequest.isWholeFromStart(range) else {
            return .whole(trySlices: cacheable && !looksLikePlaylist && inFlight == nil)
        }
        // Join a download in flight only if it already has the start of the range; otherwise ask the origin for
        // just the range.
        guard let inFlight else { return cacheable ? .rangeFromSlices : .rangeRelay }
        if !inFlight.failed, let total = inFlight.mediaLength {
            switch RangeRequest(header: range, size: total) {
            case .partial(let first, let last) where inFlight.received >= first && first >= inFlight.servableFrom:
                return .joinRange(first: first, last: last)
            case .unsatisfiable:
                return .rangeNotSatisfiable(size: total)
            default:
                break
            }
        }
        return .rangeRelay
    }
}

extension SharedFetch {
    /// What this download has, for ``MissRoute/decide(range:isHead:pathExtension:cacheable:inFlight:)``.
    var missRouteView: MissRoute.InFlight {
        let progress = progressInfo
        let head = progress.head
        return MissRoute.InFlight(
            mediaLength: head?.isPlaylist == false ? head?.contentLength : nil, received: progress.received,
            servableFrom: progress.servableFrom, failed: progress.failed)
    }
}
