import HLSCacheCore
import HLSKeys
import HLSPlaylist

extension Downloader {
    /// The hlscache (a fleet's balancer, `scheme://authority`) `item`'s resources are requested through: its own
    /// (`fetch --through`, the API's `through`), else the process's; `nil`: straight from the origins.
    func throughServer(of item: DownloadItem) -> String? {
        item.through ?? configuration.throughServer
    }

    /// Where the request for `url` goes: the origin URL itself, or with ``throughServer(of:)`` its proxy path on
    /// that server (`http://BALANCER/https/cdn…/seg.ts`), so the resource lands on the node that will serve it.
    func requestURL(_ url: OriginURL, for item: DownloadItem) -> OriginURL {
        guard let server = throughServer(of: item) else { return url }
        return (try? OriginURL(server + url.proxyPath)) ?? url
    }

    /// Where a key is fetched from through ``throughServer(of:)``: the server's `/keys/{id}/…`, where the node
    /// stores it sealed and serves it as a key (through its proxy path it would be a key-sized body, never stored);
    /// `nil` without one (the key store fetches from the origin).
    func keyRequestURL(_ url: OriginURL, id: KeyID, for item: DownloadItem) -> OriginURL? {
        guard let server = throughServer(of: item) else { return nil }
        return try? OriginURL(server + id.path(for: url))
    }

    /// A playlist as its origin wrote it: with `--through`, the balancer's hlscache served it rewritten, and its URIs
    /// point back at that server; the origin's own URLs are what the plan and the store need.
    static func originForm(of bytes: [UInt8], url: OriginURL, through server: String?, options: ParseOptions) throws(DownloadError)
        -> [UInt8]
    {
        guard let server else { return bytes }
        do {
            return try Playlist(bytes: bytes, options: options).rewrite(
                baseURL: server + url.proxyPath, keepingUnresolved: true, using: ServedPathRewriter(server: server))
        } catch {
            throw DownloadError.corrupted.with("\(url) through \(server) is not a valid playlist: \(error)")
        }
    }
}
