import HLSCacheCore
import HLSOrigin

/// What an origin's answer is, as far as its head tells: a playlist (collected whole and rewritten), media (streamed
/// as it comes), or open until its first bytes say (held by a ``PlaylistSniffer``). One set of rules for the
/// whole-object download (``SharedFetchStateMachine``) and the relay of a `Range` miss (``PassthroughRelay``). Pure.
enum OriginHeadClassifier {
    enum Verdict: Sendable, Hashable {
        /// A playlist: its type (`mpegurl`) or its path (`.m3u8`, `.m3u`) says so, and nothing says media.
        case playlist
        /// Media (or anything else that is not a playlist): sent as it comes.
        case media
        /// Open: hold the head until the first bytes tell (``MediaTypes/sniffPlaylist(_:complete:)``).
        case sniff
    }

    /// The answer to a plain GET of the whole object: an error for anything but `200` (a `206` or `304` to a request
    /// that asked for neither is the origin's fault), else what the head says. A playlist type on a media path
    /// (`seg1.ts` as `application/x-mpegURL`) and a generic type on a path without a media extension
    /// (`/live/manifest` as `application/octet-stream`) are sniffed.
    static func whole(_ head: OriginResponseHead, url: OriginURL) -> Result<Verdict, ProxyError> {
        guard head.status == 200 else {
            if head.status == 206 || head.status == 304 {
                return .failure(ProxyError.corrupted("origin \(url.host) answered \(head.status) to a plain GET"))
            }
            return .failure(ProxyError.originStatus(head.status, host: url.host, retryAfter: head.retryAfter))
        }
        let type = head.headers.first(name: "Content-Type")
        let isPlaylist = MediaTypes.isPlaylist(contentType: type, pathExtension: url.pathExtension)
        let open =
            isPlaylist
            ? MediaTypes.mightBeMedia(contentType: type, pathExtension: url.pathExtension)
            : MediaTypes.mightBePlaylist(contentType: type, pathExtension: url.pathExtension)
        if open { return .success(.sniff) }
        return .success(isPlaylist ? .playlist : .media)
    }

    /// The answer to a `Range` request relayed to the client, whatever its status (the relay judges the status when
    /// it sends the head, ``rangeFailure(_:url:)``). A playlist goes to the whole-playlist path; a playlist type on a
    /// media path is relayed as media (the part of a segment it asked for is not enough to sniff), and only an answer
    /// from the first byte (`200`, or `206` from byte 0: players ask for a playlist so, as ffmpeg's `bytes=0-`) that
    /// might be a playlist is sniffed.
    static func range(_ head: OriginResponseHead, url: OriginURL) -> Verdict {
        let type = head.headers.first(name: "Content-Type")
        if MediaTypes.isPlaylist(contentType: type, pathExtension: url.pathExtension),
            !MediaTypes.mightBeMedia(contentType: type, pathExtension: url.pathExtension)
        {
            return .playlist
        }
        let fromStart =
            head.status == 200 || (head.status == 206 && head.headers.first(name: "Content-Range")?.hasPrefix("bytes 0-") == true)
        if fromStart, MediaTypes.mightBePlaylist(contentType: type, pathExtension: url.pathExtension) { return .sniff }
        return .media
    }

    /// A relayed `Range` answer's status: `200`, `206` and `416` are passed on; anything else is the origin's
    /// error status, answered as one.
    static func rangeFailure(_ head: OriginResponseHead, url: OriginURL) -> ProxyError? {
        guard head.status == 200 || head.status == 206 || head.status == 416 else {
            return ProxyError.originStatus(head.status, host: url.host, retryAfter: head.retryAfter)
        }
        return nil
    }

    /// The `Content-Type` media is sent with: the origin's, unless it calls the media a playlist (the sniffed bytes
    /// said otherwise, or a range of a segment) or says nothing useful; then the path's extension decides.
    static func mediaType(origin: String?, pathExtension: String?) -> String {
        let origin = MediaTypes.isPlaylist(contentType: origin, pathExtension: nil) ? nil : origin
        return MediaTypes.choose(origin: origin, pathExtension: pathExtension)
    }
}
