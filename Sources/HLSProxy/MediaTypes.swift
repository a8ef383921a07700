/// Content types by file extension, for origins that send `application/octet-stream` or nothing.
public enum MediaTypes {
    public static let playlist = "application/vnd.apple.mpegurl"

    private static let byExtension: [String: String] = [
        "m3u8": playlist, "m3u": playlist,
        "ts": "video/mp2t", "tsv": "video/mp2t", "tsa": "video/mp2t",
        "mp4": "video/mp4", "m4s": "video/mp4", "m4v": "video/mp4", "cmfv": "video/mp4", "fmp4": "video/mp4", "mp4v": "video/mp4",
        "m4a": "audio/mp4", "cmfa": "audio/mp4", "aac": "audio/aac", "mp3": "audio/mpeg", "ac3": "audio/ac3", "ec3": "audio/eac3",
        "vtt": "text/vtt", "webvtt": "text/vtt", "cmft": "application/mp4", "ttml": "application/ttml+xml",
        "key": "application/octet-stream", "json": "application/json", "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png",
    ]

    /// The type for a path extension, or nil when unknown.
    public static func forExtension(_ ext: String?) -> String? {
        ext.flatMap { byExtension[$0] }
    }

    /// Whether a response is a playlist, judged by the origin's Content-Type, then by the path.
    public static func isPlaylist(contentType: String?, pathExtension: String?) -> Bool {
        if let type = contentType?.lowercased() {
            if type.contains("mpegurl") { return true }
            // Specific non-playlist types win over the extension.
            if type.hasPrefix("video/") || type.hasPrefix("audio/") { return false }
        }
        return pathExtension == "m3u8" || pathExtension == "m3u"
    }

    /// The type to send: the origin's when it is specific, else the extension's, else octet-stream.
    public static func choose(origin: String?, pathExtension: String?) -> String {
        if let origin, !origin.isEmpty, !origin.lowercased().hasPrefix("application/octet-stream"), !origin.lowercased().hasPrefix("binary/") {
            return origin
        }
        return forExtension(pathExtension) ?? origin ?? "application/octet-stream"
    }
}
