import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSKeys
import HLSPlaylist

/// An item's own playback playlists (issue 25): its multivariant playlist listing only the renditions it selected,
/// and an offline form whose media playlists end after the stored part, so an offline player neither switches to a
/// variant that was never downloaded nor stalls at the first missing segment.
extension Downloader {
    /// The item's multivariant playlist from its stored copy: every `EXT-X-STREAM-INF`, `EXT-X-MEDIA` and
    /// `EXT-X-I-FRAME-STREAM-INF` whose playlist the item did not select is left out; every other line stays as it was,
    /// with its URIs through the proxy (keys through `/keys/`). For an item of one media playlist, a multivariant
    /// playlist of that one variant.
    ///
    /// - Parameter offlineMedia: for the offline form, the path that serves rendition `n` of ``renditions`` (its
    ///   ``offlineMediaPlaylist(_:rendition:)``), put in place of each media playlist URI; nil: the proxy paths.
    /// - Throws: ``DownloadError/unknownItem``; ``DownloadError/invalidState`` when the item has not stored its
    ///   playlists (never run, or evicted: `resume` it).
    package func playbackPlaylist(_ id: String, offlineMedia: ((Int) -> String)? = nil) throws(DownloadError) -> [UInt8] {
        let item = try items.require(id)
        guard !item.renditions.isEmpty else {
            throw DownloadError.invalidState.with("item \(id) has not read its playlists yet (\(item.state.rawValue)); start or resume it")
        }
        // A recording's media playlists are what it recorded (Recording/), never the origin's live window.
        let offlineMedia = item.record == nil ? offlineMedia : offlineMedia ?? { DownloadItem.offlineMediaPath(of: id, rendition: $0) }
        if item.record != nil, item.renditions == [item.url], let media = offlineMedia {
            return Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n\(media(0))\n".utf8)
        }
        let (playlist, base) = try storedPlaylist(item.url, of: item)
        let selected = item.renditions.compactMap { try? OriginURL($0).proxyPath }
        let position = Dictionary(selected.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
        func replacement(_ path: String) -> String { offlineMedia.flatMap { media in position[path].map(media) } ?? path }
        guard playlist.kind == .master else {
            // One media playlist: a multivariant playlist of one variant, so the same URL form works for every item.
            let uri = replacement(selected.first ?? "")
            return Array("#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\n\(uri)\n".utf8)
        }
        let text = String(decoding: try rewritten(playlist, base: base), as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let wanted = Set(selected)
        var out: [String] = []
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let content = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if content.hasPrefix("#EXT-X-STREAM-INF") {
                // The variant's URI is the next line that is not blank or a comment (tags do not come between).
                var uriLine = index + 1
                while uriLine < lines.count, Self.isBlankOrComment(lines[uriLine]) { uriLine += 1 }
                guard uriLine < lines.count else { break }
                let uri = lines[uriLine].trimmingCharacters(in: .whitespacesAndNewlines)
                if wanted.contains(uri) {
                    out += lines[index..<uriLine]
                    out.append(lines[uriLine].replacingOccurrences(of: uri, with: replacement(uri)))
                }
                index = uriLine + 1
                continue
            }
            if content.hasPrefix("#EXT-X-MEDIA:") || content.hasPrefix("#EXT-X-I-FRAME-STREAM-INF:"),
                let uri = Self.uriAttribute(of: content)
            {
                if wanted.contains(uri) { out.append(line.replacingOccurrences(of: "URI=\"\(uri)\"", with: "URI=\"\(replacement(uri))\"")) }
                index += 1
                continue
            }
            out.append(line)
            index += 1
        }
        return Array(out.joined(separator: "\n").utf8)
    }

    /// Rendition `rendition` (an index into the item's ``DownloadItem/renditions``) for offline playback: its stored
    /// media playlist with URIs through the proxy, ending after the last segment stored before the first one missing
    /// (`#EXT-X-ENDLIST` added), so a player offline stops cleanly there.
    /// - Throws: ``DownloadError/unknownItem`` (also for a rendition out of range), ``DownloadError/invalidState``.
    package func offlineMediaPlaylist(_ id: String, rendition: Int) throws(DownloadError) -> [UInt8] {
        let item = try items.require(id)
        guard item.renditions.indices.contains(rendition) else {
            throw DownloadError.unknownItem.with("item \(id) has no rendition \(rendition) (it has \(item.renditions.count))")
        }
        if item.record != nil { return try recordedMediaPlaylist(item, rendition: rendition) }
        let (playlist, base) = try storedPlaylist(item.renditions[rendition], of: item)
        guard playlist.kind == .media else { throw DownloadError.corrupted.with("\(item.renditions[rendition]) is not a media playlist") }
        let text = String(decoding: try rewritten(playlist, base: base), as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // Everything through the URI line of the last segment stored; a segment's tags come before its URI line.
        var keep: Int?
        var firstSegmentTag: Int?
        var truncated = false
        for (index, line) in lines.enumerated() {
            let content = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if firstSegmentTag == nil, content.hasPrefix("#EXTINF") { firstSegmentTag = index }
            guard !Self.isBlankOrComment(line), !content.hasPrefix("#") else { continue }
            guard let url = try? OriginURL(proxyTarget: content),
                store.lookup(CacheKey(url, volatileParameters: configuration.volatileQueryParameters)) != nil
            else {
                truncated = true
                break
            }
            keep = index
        }
        guard truncated else { return Array(text.utf8) }
        let end = keep.map { $0 + 1 } ?? firstSegmentTag ?? lines.count
        lines = Array(lines[..<end])
        lines.append("#EXT-X-ENDLIST")
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    /// How much of each rendition the item has in the cache: its duration, the seconds of its segments stored, and
    /// the seconds playable from its start without a gap (what the offline form plays). Reads the stored media
    /// playlists; a rendition whose playlist is not stored is left out.
    package func renditionStorage(of id: String) throws(DownloadError) -> [RenditionStorage] {
        let item = try items.require(id)
        var result: [RenditionStorage] = []
        for url in item.renditions {
            guard let (playlist, base) = try? storedPlaylist(url, of: item), playlist.kind == .media,
                let media = try? playlist.media(baseURL: base)
            else { continue }
            var storage = RenditionStorage(url: url, seconds: 0, storedSeconds: 0, storedFromStart: 0)
            var gap = false
            for segment in media.segments {
                storage.seconds += segment.duration
                let stored =
                    (try? OriginURL(segment.url)).map {
                        store.lookup(CacheKey($0, volatileParameters: configuration.volatileQueryParameters)) != nil
                    } ?? false
                if stored { storage.storedSeconds += segment.duration } else { gap = true }
                if stored && !gap { storage.storedFromStart += segment.duration }
            }
            result.append(storage)
        }
        return result
    }

    /// The stored raw copy of one of the item's playlists and the URL its relative references resolve against.
    private func storedPlaylist(_ url: String, of item: DownloadItem) throws(DownloadError) -> (Playlist, String) {
        let origin: OriginURL
        do { origin = try OriginURL(url) } catch { throw DownloadError.corrupted.with("\(url): \(error)") }
        let key = CacheKey(origin, volatileParameters: configuration.volatileQueryParameters)
        guard let object = store.lookup(key), let data = FileManager.default.contents(atPath: object.path) else {
            throw DownloadError.invalidState.with(
                "the playlist \(origin.redacted) of item \(item.id) is not in the cache (\(item.state.rawValue)); `resume` it")
        }
        do {
            return (
                try Playlist(bytes: [UInt8](data), options: ParseOptions(maxBytes: configuration.maxPlaylistBytes)), object.location ?? url
            )
        } catch {
            throw DownloadError.corrupted.with("the stored playlist \(origin.redacted) is invalid: \(error)")
        }
    }

    /// Every URI through the proxy, keys through the key store's `/keys/{id}` (as the proxy rewrites them).
    func rewritten(_ playlist: Playlist, base: String) throws(DownloadError) -> [UInt8] {
        var rewriter = ProxyPathRewriter()
        let keys = self.keys
        rewriter.keyRewrite = { @Sendable resolved, _, method in
            guard let url = try? OriginURL(resolved) else { return nil }
            return try keys.register(url, method: method).path
        }
        do {
            return try playlist.rewrite(baseURL: base, keepingUnresolved: true, using: rewriter)
        } catch {
            throw DownloadError.corrupted.with("cannot rewrite the stored playlist: \(error)")
        }
    }

    private static func isBlankOrComment(_ line: String) -> Bool {
        let content = line.trimmingCharacters(in: .whitespacesAndNewlines)
        return content.isEmpty || (content.hasPrefix("#") && !content.hasPrefix("#EXT"))
    }

    /// The value of `URI="…"` in a tag line.
    private static func uriAttribute(of line: String) -> String? {
        guard let start = line.range(of: "URI=\"") else { return nil }
        let rest = line[start.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end])
    }
}

extension DownloadItem {
    /// The path on `hlscache serve` of the item's own playlist (its admin API): only its renditions
    /// (`/api/v1/items/ID/master.m3u8`), or the offline form (`offline.m3u8`).
    package static func playbackPath(of id: String, offline: Bool) -> String {
        "/api/v1/items/\(escaped(id))/\(offline ? "offline" : "master").m3u8"
    }

    /// Rendition `rendition` of the offline form: `/api/v1/items/ID/offline/N.m3u8`.
    package static func offlineMediaPath(of id: String, rendition: Int) -> String {
        "/api/v1/items/\(escaped(id))/offline/\(rendition).m3u8"
    }

    private static func escaped(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-_."))) ?? id
    }
}

/// How much of one rendition of an item is stored (``Downloader/renditionStorage(of:)``).
package struct RenditionStorage: Sendable, Hashable {
    /// The media playlist's origin URL.
    package var url: String
    /// The rendition's duration.
    package var seconds: Double
    /// Seconds of its segments in the cache.
    package var storedSeconds: Double
    /// Seconds from its start up to the first segment missing: what plays offline.
    package var storedFromStart: Double
}
