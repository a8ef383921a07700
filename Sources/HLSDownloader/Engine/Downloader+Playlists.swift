import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import HLSPlaylist
import NIOCore
import NIOPosix

extension Downloader {
    /// Reads the item's playlists (from the cache when stored, else from the origin, storing them raw when
    /// `storing`), chooses renditions and lays out every resource.
    ///
    /// With `storing: false` (`--dry-run`) playlists are read into memory only and nothing is written.
    /// - Throws: ``DownloadError/notFound`` (404 on the item's playlist), ``DownloadError/corrupted``,
    ///   ``DownloadError/unsupported`` for live playlists, the network codes.
    package func makePlan(for item: DownloadItem, storing: Bool) async throws(DownloadError) -> DownloadPlan {
        do {
            let (renditions, playlistURLs, notes) = try await loadRenditions(for: item, storing: storing)
            if let live = renditions.first(where: { $0.1.isLive }) {
                throw DownloadError.unsupported.with(
                    "\(live.0.url) is a live playlist (no EXT-X-ENDLIST): record it with `hlscache fetch URL --record` (docs/fetch.md#live)"
                )
            }
            var plan = try DownloadPlan.make(
                playlists: playlistURLs, renditions: renditions, seconds: item.precacheSeconds,
                volatileParameters: configuration.volatileQueryParameters, slicing: SliceLayout(sliceSize: configuration.sliceSize))
            plan.notes = notes
            // The poster is stored with the item (first, so a page can show it while the rest downloads).
            if let poster = item.posterURL, let posterURL = try? OriginURL(poster) {
                let key = CacheKey(posterURL, volatileParameters: configuration.volatileQueryParameters)
                if !plan.resources.contains(where: { $0.key == key }) {
                    var resource = PlannedResource(url: posterURL, key: key, kind: .other)
                    resource.isPoster = true
                    plan.media.insert(resource, at: 0)
                }
            }
            return plan
        } catch {
            throw DownloadError.from(error)
        }
    }

    /// Reads the item's playlists (master and the selected media playlists; stored when `storing` and not live) and
    /// returns the chosen renditions parsed, the playlist URLs (the item's first) and the notes for the user.
    func loadRenditions(for item: DownloadItem, storing: Bool) async throws(DownloadError) -> (
        renditions: [(SelectedPlaylist, MediaPlaylist)], playlistURLs: [OriginURL], notes: [String]
    ) {
        do {
            let url: OriginURL
            do { url = try OriginURL(item.url) } catch { throw DownloadError.corrupted.with("\(item.url): \(error)") }
            let top = try await loadPlaylist(url, item: item, isMaster: true, storing: storing)
            var renditions: [(SelectedPlaylist, MediaPlaylist)] = []
            var playlistURLs = [url]
            var notes: [String] = []
            var tolerated: [String] = Self.toleranceNotes(top.playlist, url: url)
            if top.playlist.isChannelList, let first = top.playlist.warnings.first(where: { $0.kind == .channelList }) {
                throw DownloadError.unsupported.with(
                    "\(url.redacted) is an IPTV channel list (line \(first.line): #EXTINF:-1 …), not a stream: fetch one channel's URL")
            }
            switch top.playlist.kind {
            case .media:
                let media = try top.playlist.media(baseURL: top.baseURL)
                renditions.append((SelectedPlaylist(url: url.string, role: .media, bandwidth: nil, name: nil, language: nil), media))
            case .master:
                let master = try top.playlist.master(baseURL: top.baseURL)
                let selected = item.selection.select(from: master)
                notes = item.selection.unmatched(in: master)
                guard !selected.isEmpty else { throw DownloadError.corrupted.with("the master playlist names no rendition to download") }
                // The renditions' playlists load in parallel (one round trip instead of one per rendition); results
                // and the error reported (the first rendition's that failed) follow the master's order.
                var mediaURLs: [OriginURL] = []
                for choice in selected {
                    do { mediaURLs.append(try OriginURL(choice.url)) } catch {
                        throw DownloadError.corrupted.with("\(choice.url): \(error)")
                    }
                }
                let loaded = await loadPlaylists(mediaURLs, item: item, storing: storing)
                for (choice, (mediaURL, result)) in zip(selected, zip(mediaURLs, loaded)) {
                    let playlist = try result.get()
                    guard playlist.playlist.kind == .media else {
                        throw DownloadError.corrupted.with("\(choice.url) is not a media playlist")
                    }
                    renditions.append((choice, try playlist.playlist.media(baseURL: playlist.baseURL, imports: master.variables)))
                    playlistURLs.append(mediaURL)
                    tolerated += Self.toleranceNotes(playlist.playlist, url: mediaURL)
                }
            }
            return (renditions, playlistURLs, notes + tolerated)
        } catch {
            throw DownloadError.from(error)
        }
    }

    /// One note per tolerance of a playlist read as players read it (the first line of each kind).
    static func toleranceNotes(_ playlist: Playlist, url: OriginURL) -> [String] {
        playlist.warnings.map { "\(url.redacted) departs from RFC 8216, read as players read it: \($0)" }
    }

    /// Loads media playlists in parallel; the results are in the order of `urls`.
    private func loadPlaylists(_ urls: [OriginURL], item: DownloadItem, storing: Bool) async
        -> [Result<(playlist: Playlist, baseURL: String), any Error>]
    {
        await withTaskGroup(of: IndexedPlaylist.self) { group in
            for (position, url) in urls.enumerated() {
                group.addTask {
                    do {
                        let loaded = try await self.loadPlaylist(url, item: item, isMaster: false, storing: storing)
                        return IndexedPlaylist(position: position, result: .success(loaded))
                    } catch {
                        return IndexedPlaylist(position: position, result: .failure(error))
                    }
                }
            }
            var results = [Result<(playlist: Playlist, baseURL: String), any Error>](
                repeating: .failure(CancellationError()), count: urls.count)
            for await loaded in group { results[loaded.position] = loaded.result }
            return results
        }
    }

    private struct IndexedPlaylist: Sendable {
        var position: Int
        var result: Result<(playlist: Playlist, baseURL: String), any Error>
    }

    /// A playlist: the stored raw copy when there is one (a resumed item reads what it started with), else the
    /// origin's, parsed before it is stored so an invalid playlist is never cached.
    func loadPlaylist(_ url: OriginURL, item: DownloadItem, isMaster: Bool, storing: Bool) async throws
        -> (playlist: Playlist, baseURL: String)
    {
        let key = CacheKey(url, volatileParameters: configuration.volatileQueryParameters)
        let options = ParseOptions(maxBytes: configuration.maxPlaylistBytes, tolerant: !configuration.strictPlaylists)
        let maxBytes = configuration.maxPlaylistBytes
        // Playlists may come gzipped (the client decodes them); the item's own headers come after and win.
        let headers = [OriginClient.acceptCompressed] + item.headers.map { ($0.name, $0.value) }
        if let cached = store.lookup(key), cached.kind == .playlist, let data = FileManager.default.contents(atPath: cached.path),
            let playlist = try? Playlist(bytes: [UInt8](data), options: options), !playlist.isLiveMedia
        {
            // Stored after a redirect: relative URIs resolve against the URL that answered then.
            return (playlist, cached.location ?? url.string)
        }
        let through = throughServer(of: item)
        let requested = requestURL(url, for: item)
        let response = try await withRetries(url, isMaster: isMaster) {
            try await self.origin.fetch(requested, headers: headers, maxBytes: maxBytes)
        }
        addVolume(response.body.readableBytes)
        let bytes = try Self.originForm(of: [UInt8](response.body.readableBytesView), url: url, through: through, options: options)
        let playlist: Playlist
        do {
            playlist = try Playlist(bytes: bytes, options: options)
        } catch {
            throw DownloadError.corrupted.with("\(url) is not a valid playlist: \(error)")
        }
        // Through a balancer, the playlist is the origin's at `url` (read back as written there).
        let answered = through == nil ? response.head.url : url
        // A live playlist is never stored: a copy would go stale, and the proxy would serve it as a hit (the item is
        // refused as `unsupported` once the plan sees it is live).
        if storing && !playlist.isLiveMedia {
            let locked = item.locked
            let redirected = CacheKey(answered, volatileParameters: configuration.volatileQueryParameters) != key
            try await threadPool.runIfActive { [store] in
                let writer = try store.makeWriter(for: key, expectedLength: Int64(bytes.count))
                do {
                    try writer.write(bytes)
                    _ = try writer.finish(
                        contentType: "application/vnd.apple.mpegurl", kind: .playlist, locked: locked,
                        location: redirected ? answered.string : nil)
                } catch {
                    writer.abort()
                    throw error
                }
            }
        }
        // Relative URIs resolve against the URL that answered (after redirects).
        return (playlist, answered.string)
    }
}
