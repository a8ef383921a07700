import Foundation

/// Content types by file extension, for origins that send `application/octet-stream` or nothing.
package enum MediaTypes {
    package static let playlist = "application/vnd.apple.mpegurl"

    private static let byExtension: [String: String] = [
        "m3u8": playlist, "m3u": playlist,
        "ts": "video/mp2t", "tsv": "video/mp2t", "tsa": "video/mp2t",
        "mp4": "video/mp4", "m4s": "video/mp4", "m4v": "video/mp4", "cmfv": "video/mp4", "fmp4": "video/mp4", "mp4v": "video/mp4",
        "m4a": "audio/mp4", "cmfa": "audio/mp4", "aac": "audio/aac", "mp3": "audio/mpeg", "ac3": "audio/ac3", "ec3": "audio/eac3",
        "vtt": "text/vtt", "webvtt": "text/vtt", "cmft": "application/mp4", "ttml": "application/ttml+xml",
        "key": "application/octet-stream", "json": "application/json", "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png",
    ]

    /// The type for a path extension, or nil when unknown.
    package static func forExtension(_ ext: String?) -> String? {
        ext.flatMap { byExtension[$0] }
    }

    /// The types IPTV channel lists are served with (`audio/x-mpegurl`, `audio/mpegurl`, `application/x-mpegurl`;
    /// case and parameters ignored): a playlist served so is given absolute URLs and keeps its type.
    package static func isChannelListType(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let type = contentType.split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        return type == "audio/x-mpegurl" || type == "audio/mpegurl" || type == "application/x-mpegurl"
    }

    /// Whether a response is a playlist, judged by the origin's Content-Type, then by the path.
    package static func isPlaylist(contentType: String?, pathExtension: String?) -> Bool {
        if let type = contentType?.lowercased() {
            if type.contains("mpegurl") { return true }
            // Specific non-playlist types win over the extension.
            if type.hasPrefix("video/") || type.hasPrefix("audio/") { return false }
        }
        return pathExtension == "m3u8" || pathExtension == "m3u"
    }

    /// Whether a response that neither its type nor its path calls a playlist may still be one, so its first bytes
    /// decide (``sniffPlaylist(_:complete:)``): a generic or missing type on a path without a known media
    /// extension (`/live/manifest`, `/play?id=5` sent as `application/octet-stream` or `text/plain`). Proxied
    /// as a segment, such a playlist would go to the player unrewritten, and a live one would be cached forever.
    package static func mightBePlaylist(contentType: String?, pathExtension: String?) -> Bool {
        if let pathExtension, byExtension[pathExtension] != nil { return false }
        guard let type = contentType?.lowercased().split(separator: ";").first?.trimmingCharacters(in: .whitespaces), !type.isEmpty else {
            return true
        }
        return ["application/octet-stream", "binary/octet-stream", "text/plain", "application/unknown"].contains(type)
    }

    /// Whether a response its type calls a playlist may be media after all: a path with a media extension
    /// (`seg1.ts` sent as `application/x-mpegURL` by an origin that labels a whole directory so). The first bytes
    /// decide; players ignore a segment's type, so such a stream plays directly and must play through the proxy.
    package static func mightBeMedia(contentType: String?, pathExtension: String?) -> Bool {
        guard let pathExtension, let type = byExtension[pathExtension] else { return false }
        return type != playlist && type != "application/json"
    }

    /// Decides from a body's first bytes whether it is a playlist: an optional UTF-8 byte-order mark, optional
    /// blank lines and spaces (fewer than ``maxLeadingBlank`` bytes; players and the tolerant reader read past
    /// them), then `#EXTM3U` ending its line. `nil` while too few bytes arrived to tell, unless `complete`.
    package static func sniffPlaylist(_ prefix: some Collection<UInt8>, complete: Bool) -> Bool? {
        var bytes = Array(prefix.prefix(3 + maxLeadingBlank + 8))
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            bytes.removeFirst(3)
        } else if bytes.count < 3 && [UInt8]([0xEF, 0xBB, 0xBF]).starts(with: bytes) && !complete {
            return nil
        }
        let blank = bytes.prefix { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }.count
        if blank > 0 {
            if blank >= maxLeadingBlank { return false }
            bytes.removeFirst(blank)
            if bytes.isEmpty { return complete ? false : nil }
        }
        let signature = Array("#EXTM3U".utf8)
        guard bytes.count > signature.count else {
            if complete || !signature.starts(with: bytes) { return bytes == signature }
            return nil
        }
        let next = bytes[signature.count]
        return bytes.starts(with: signature) && (next == 0x0A || next == 0x0D || next == 0x20 || next == 0x09)
    }

    /// The most whitespace before `#EXTM3U` that still lets a body of a generic type be taken for a playlist.
    package static let maxLeadingBlank = 64

    /// The type to send: the origin's when it is specific, else the extension's, else octet-stream.
    package static func choose(origin: String?, pathExtension: String?) -> String {
        if let origin, !origin.isEmpty, !origin.lowercased().hasPrefix("application/octet-stream"),
            !origin.lowercased().hasPrefix("binary/")
        {
            return origin
        }
        return forExtension(pathExtension) ?? origin ?? "application/octet-stream"
    }
}
