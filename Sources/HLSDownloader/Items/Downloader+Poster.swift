import Foundation
import HLSCacheCore
import HLSCacheStore

/// An item's poster apart from its stream (PCD `deleteThumbnail:NO`, `VOCItemDownloadThumbnailOnly`): kept when the
/// item's files are deleted and its record kept, and stored alone for an item not downloaded yet.
extension Downloader {
    /// The cache key of the item's poster, if it has one.
    package func posterKey(of item: DownloadItem) -> String? {
        guard let poster = item.posterURL, let url = try? OriginURL(poster) else { return nil }
        return CacheKey(url, volatileParameters: configuration.volatileQueryParameters).value
    }

    /// `fetch --poster-only`, `POST /items` with `"posterOnly": true`: stores the item's poster now, and nothing else;
    /// the item keeps its state (`ready` for a new one: `resume` downloads the stream, the poster already stored). A
    /// poster the origin refuses is kept as the item's `posterError`, as in a run, and thrown.
    /// - Throws: ``DownloadError/invalidState`` for an item without a poster; the origin's error.
    @discardableResult
    package func storePoster(of id: String) async throws(DownloadError) -> DownloadItem {
        let item = try items.require(id)
        guard let poster = item.posterURL, let url = try? OriginURL(poster), let key = posterKey(of: item) else {
            throw DownloadError.invalidState.with("item \(id) has no poster")
        }
        try items.addResource(id, ItemResource(key: key, url: url.string, kind: CacheObjectKind.other.rawValue))
        let size: Int64
        if let cached = store.lookup(CacheKey(storedValue: key)) {
            size = cached.size
        } else {
            var resource = PlannedResource(url: url, key: CacheKey(storedValue: key), kind: .other)
            resource.isPoster = true
            let counter = RunCounter(limiter: limiter, volume: { [self] in addVolume($0) })
            do {
                let body = try await fetchResource(resource, for: item, counter: counter)
                size = try await commitThreadPool.runIfActive(eventLoop: eventLoopGroup.any()) { try body.commit().size }.get()
            } catch {
                _ = usedVolume(policies: configuration.policies, force: true)
                try posterFailed(resource, of: item, error: error)
                throw DownloadError.from(error)
            }
            _ = usedVolume(policies: configuration.policies, force: true)
        }
        try items.markPosterStored(id, key: key, size: size)
        return try items.require(id)
    }

    /// The `.delete` transition's eviction: every object of the item but its poster, which stays for the record
    /// `rm --keep-metadata` keeps (unlocked unless a live locked item lists it: this one is no longer live); a
    /// removal without the record evicts it after (``evictPoster(of:)``).
    func evictAllButPoster(of id: String) throws(DownloadError) {
        let item = try items.require(id)
        let resources = try items.resources(id)
        guard let key = posterKey(of: item), let poster = resources.first(where: { $0.key == key }) else {
            try evictObjects(of: id)
            return
        }
        try evict(resources.filter { $0.key != key }, of: id)
        if poster.done, try !items.isShared(key, except: id, lockedOnly: true) {
            do {
                try store.setLocked([CacheKey(storedValue: key)], false)
            } catch {
                throw DownloadError.from(error)
            }
        }
        try items.markNothingStored(id, except: key)
    }

    /// Evicts the item's poster (unless another live item lists it): `rm` without `--keep-metadata`.
    func evictPoster(of id: String) throws(DownloadError) {
        guard let item = try items.item(id), let key = posterKey(of: item) else { return }
        try evict(try items.resources(id).filter { $0.key == key }, of: id)
    }
}
