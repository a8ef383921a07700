import Foundation
import HLSCacheStore

extension Downloader {
    /// Refuses a plan whose estimate cannot fit: more than the size cap less what locked objects hold, or more
    /// than the free disk space (plus what eviction could free: the unlocked objects) minus the cushion. Objects
    /// already stored do not count.
    /// - Throws: ``DownloadError/cacheFull``.
    package func checkFits(_ plan: DownloadPlan) throws(DownloadError) {
        guard let estimate = plan.estimatedBytes, estimate > 0 else { return }
        let stored = plan.resources.reduce(Int64(0)) { $0 + (store.lookup($1.key)?.size ?? 0) }
        let needed = estimate - stored
        guard needed > 0 else { return }
        if needed > store.maxBytes {
            throw DownloadError.cacheFull.with(
                "the estimate (\(Self.format(needed))) is more than the cache size cap (\(Self.format(store.maxBytes)))")
        }
        // Locked objects (of locked items) stay whatever happens; only the rest can be evicted to make room.
        let locked = (try? store.lockedBytes()) ?? 0
        if needed > store.maxBytes - locked {
            throw DownloadError.cacheFull.with(
                "the estimate (\(Self.format(needed))) is more than the cache size cap (\(Self.format(store.maxBytes))) less the \(Self.format(locked)) locked items hold; unlock or remove some"
            )
        }
        let used = (try? store.usage().bytes) ?? 0
        if let free = (try? FileManager.default.attributesOfFileSystem(forPath: store.directory))?[.systemFreeSize] as? NSNumber {
            let room = free.int64Value + (used - locked) - store.freeDiskCushion
            if needed > room {
                throw DownloadError.cacheFull.with(
                    "the estimate (\(Self.format(needed))) is more than the disk can hold above the free-disk cushion")
            }
        }
    }

    /// After the last write: every object of the plan must still be stored. Without an estimate (a media playlist,
    /// a master without `BANDWIDTH`) ``checkFits(_:)`` cannot refuse a stream bigger than the cache, and its own later
    /// writes then evict its first segments (LRU); pressure from the proxy can do the same to a long prewarm. Such an
    /// item is not `cached`: it fails `cacheFull`, and a resume fetches what went missing.
    /// - Throws: ``DownloadError/cacheFull``.
    ///
    /// An object another download is replacing at this moment (two items of one stream) is a miss for the instant of
    /// its commit (the old row goes before the new file comes, ``CacheStore``): what is missing is looked at again a
    /// few times, a tenth of a second apart, before it counts.
    func checkStillStored(_ plan: DownloadPlan) async throws(DownloadError) {
        // Keys go to the key store, not the object cache.
        let objects = plan.resources.filter { $0.kind != .key }
        var missing = objects.filter { store.lookup($0.key) == nil }
        for _ in 0..<3 where !missing.isEmpty {
            try? await Task.sleep(for: .milliseconds(100))
            missing = missing.filter { store.lookup($0.key) == nil }
        }
        guard let first = missing.first else { return }
        throw DownloadError.cacheFull.with(
            "\(missing.count) of the item's \(objects.count) objects (the first: \(first.url.redacted)) were evicted before the download ended:"
                + " the stream does not fit in the cache (\(Self.format(store.maxBytes)) cap) beside what else it holds; raise the cap or prewarm fewer seconds or variants"
        )
    }

    static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(bytes) B" : "\(String(format: "%.1f", value)) \(units[unit])"
    }
}
