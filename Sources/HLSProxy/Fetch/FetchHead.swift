import HLSCacheCore

/// The origin's answer to a ``SharedFetch``, as far as its clients need it (decided by ``SharedFetchStateMachine``
/// at the head, or after sniffing).
struct FetchHead: Sendable {
    var contentLength: Int64?
    var contentType: String
    var isPlaylist: Bool
    /// The origin's ETag when strong (``OriginResponseHead/strongETag``): sent on the miss and stored with the
    /// object, so hits send the same one. A weak or absent one is not used: the store derives a strong one.
    var etag: String?
    var lastModified: String?
    /// The URL that answered (after redirects); playlists resolve against it.
    var url: OriginURL
    /// A playlist's `Content-Type` as the origin sent it (a channel list keeps it).
    var originContentType: String? = nil
}
