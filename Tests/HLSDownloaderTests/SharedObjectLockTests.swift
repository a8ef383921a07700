import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import Testing

/// An object is locked exactly when a live (not expired or deleted) locked item lists it: removing or expiring a
/// locked item unlocks what it shares with unlocked items, and a removed or expired item cannot be locked again
/// (store.md "Never locked objects … set by items", cli.md `unlock`).
@Suite(.serialized) struct SharedObjectLockTests {
    private func start() async throws -> TestOrigin {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        return origin
    }

    /// Three items on one cache: `A` (the master, locked), `B` (variant 0, unlocked: shares its playlist and
    /// segments with `A`), `C` (variant 1, locked).
    private func threeItems(_ fetch: DownloaderHarness, expiring: Date? = nil) async throws {
        #expect(try await fetch.fetch("/master.m3u8", id: "A", locked: true, expiresAt: expiring).state == .cached)
        #expect(try await fetch.fetch("/v0/index.m3u8", id: "B").state == .cached)
        #expect(try await fetch.fetch("/v1/index.m3u8", id: "C", locked: true).state == .cached)
        #expect(try lockedKeys(fetch, of: "B").count == (try fetch.items.resources("B").count), "B's objects are A's too: locked by A")
    }

    private func lockedKeys(_ fetch: DownloaderHarness, of id: String) throws -> [String] {
        try fetch.items.resources(id).filter { fetch.store.lookup(CacheKey(storedValue: $0.key))?.locked == true }.map(\.key)
    }

    /// The sum of the sizes of the stored objects `id` lists.
    private func storedBytes(_ fetch: DownloaderHarness, of id: String) throws -> Int64 {
        try fetch.items.resources(id).reduce(0) { $0 + (fetch.store.lookup(CacheKey(storedValue: $1.key))?.size ?? 0) }
    }

    /// After `A` is gone: `B` is unlocked and stored, `C` locked, and the locked bytes are `C`'s alone.
    private func expectOnlyCLocked(_ fetch: DownloaderHarness, _ context: String) throws {
        #expect(try lockedKeys(fetch, of: "B").isEmpty, "\(context): B's objects, shared with A, are unlocked")
        #expect(try fetch.stored("/v0/index.m3u8") != nil && fetch.stored("/v0/seg000.ts") != nil, "\(context): B's objects stay")
        #expect(try lockedKeys(fetch, of: "C").count == (try fetch.items.resources("C").count), "\(context): C's objects stay locked")
        #expect(try fetch.store.lockedBytes() == (try storedBytes(fetch, of: "C")), "\(context): only C's objects are locked")
    }

    @Test func removingALockedItemUnlocksWhatItSharesWithUnlockedItems() async throws {
        let origin = try await start()
        let fetch = try DownloaderHarness(origin: origin)
        try await threeItems(fetch)
        try fetch.downloader.remove("A", keepMetadata: true)
        try expectOnlyCLocked(fetch, "rm A")

        // A deleted item cannot be locked again (nor unlocked): it would lock B's objects for good.
        #expect(throws: DownloadError.invalidState) { try fetch.downloader.setLocked("A", true) }
        #expect(throws: DownloadError.invalidState) { try fetch.downloader.setLocked("A", false) }
        #expect(try fetch.items.item("A")?.locked == true, "unchanged")
        try expectOnlyCLocked(fetch, "lock A after rm")

        // Unlocking a live item keeps what another live locked item lists locked; the bytes go with the last lock.
        try fetch.downloader.remove("A", keepMetadata: false)
        try fetch.downloader.setLocked("B", true)
        try fetch.downloader.setLocked("B", false)
        try expectOnlyCLocked(fetch, "lock and unlock B")
        try fetch.downloader.remove("C", keepMetadata: false)
        #expect(try fetch.store.lockedBytes() == 0)
        await fetch.shutdown()
        await origin.stop()
    }

    @Test func expiringALockedItemUnlocksWhatItSharesWithUnlockedItems() async throws {
        let origin = try await start()
        let fetch = try DownloaderHarness(origin: origin)
        let expiry = Date().addingTimeInterval(3600)
        try await threeItems(fetch, expiring: expiry)
        #expect(try fetch.downloader.expireDue(now: expiry.addingTimeInterval(1)) == ["A"])
        try expectOnlyCLocked(fetch, "A expired")
        #expect(throws: DownloadError.invalidState) { try fetch.downloader.setLocked("A", true) }
        try expectOnlyCLocked(fetch, "lock A after its expiry")
        await fetch.shutdown()
        await origin.stop()
    }
}
