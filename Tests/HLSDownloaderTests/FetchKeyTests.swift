import Foundation
import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSOrigin
import HLSTestSupport
import Testing

/// Keys of prewarmed items: fetched with the item's headers, reported by `keyStatus(of:)`, purged with the item.
@Suite struct FetchKeyTests {
    /// The key server wants a header only the item knows (`hlscache fetch --header`): the key is fetched with it,
    /// and the header value is not stored in the clear in the key store.
    @Test func theItemsHeadersGoWithItsKeyFetches() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        origin.setFault(.requireHeader("X-Key-Token", "only-the-item-knows"), for: "/keys/key0.key")
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        try fetch.items.insert(
            DownloadItem(
                id: "with-header", url: fetch.url("/index.m3u8"), selection: RenditionSelection(), precacheSeconds: 4,
                headers: [HeaderField(name: "X-Key-Token", value: "only-the-item-knows")]))
        let item = try await fetch.downloader.run("with-header")
        #expect(item.state == .partiallyCached, "\(item.errorCode ?? "") \(item.errorMessage ?? "")")
        let statuses = try fetch.downloader.keyStatus(of: "with-header")
        #expect(statuses.count == 1)
        #expect(statuses.first?.state == .valid)
        #expect(statuses.first?.host == "127.0.0.1")
        // A renewal (serve --key-auto-renew, hlscache keys renew) sends the header again.
        let keys = fetch.keys
        let idText = try #require(statuses.first?.id)
        let id = try #require(KeyID(idText))
        let renewed = try await keys.renew(id)
        #expect(renewed.lastError == nil)
        #expect(
            origin.requests(matching: "/keys/key0.key").allSatisfy { request in
                request.headers.contains { $0.0.lowercased() == "x-key-token" && $0.1 == "only-the-item-knows" }
            })
        #expect(!anyFile(under: fetch.cacheDirectory.appendingPathComponent("keys.sqlite"), contains: Array("only-the-item-knows".utf8)))
        await fetch.shutdown()
        await origin.stop()
    }

    /// An item that expires (or is removed) takes its keys' stored copies with it; `keyStatus` then says `pending`.
    @Test func expiryAndRemovalPurgeTheItemsKeys() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let keys = fetch.keys

        let expiring = try await fetch.fetch("/index.m3u8", id: "expiring", seconds: 4, expiresAt: Date().addingTimeInterval(3600))
        #expect(expiring.state == .partiallyCached)
        let before = try fetch.downloader.keyStatus(of: "expiring")
        #expect(before.map(\.state) == [.valid])
        #expect(before.first?.expiresAt != nil, "the item's expiry bounds its key")
        let id = try #require(KeyID(before[0].id))
        #expect(try fetch.downloader.expireDue(now: Date().addingTimeInterval(7200)) == ["expiring"])
        #expect(try keys.record(id)?.isStored == false)
        #expect(try fetch.downloader.keyStatus(of: "expiring").map(\.state) == [.pending])

        let removed = try await fetch.fetch("/index.m3u8", id: "removed", seconds: 4)
        #expect(removed.state == .partiallyCached)
        #expect(try keys.record(id)?.isStored == true)
        try fetch.downloader.remove("removed", keepMetadata: true)
        #expect(try keys.record(id)?.isStored == false)
        await fetch.shutdown()
        await origin.stop()
    }

    /// With `keepFilesOnExpiry` an expired item's segments stay as ordinary (unlocked) cache objects; its keys
    /// are purged all the same.
    @Test func keepingFilesOnExpiryUnlocksThemAndStillPurgesKeys() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin) { $0.keepFilesOnExpiry = true }
        defer { Task { await fetch.shutdown() } }
        let keys = fetch.keys
        let item = try await fetch.fetch("/index.m3u8", id: "kept", seconds: 4, locked: true, expiresAt: Date().addingTimeInterval(3600))
        #expect(item.state == .partiallyCached)
        #expect(fetch.store.lookup(try fetch.key("/p0/seg000.ts"))?.locked == true)
        let id = try #require(KeyID(try fetch.downloader.keyStatus(of: "kept")[0].id))
        #expect(try fetch.downloader.expireDue(now: Date().addingTimeInterval(7200)) == ["kept"])
        #expect(try fetch.items.require("kept").state == .expired)
        let segment = try #require(fetch.store.lookup(try fetch.key("/p0/seg000.ts")))
        #expect(!segment.locked, "an expired item's objects are ordinary LRU objects")
        #expect(try fetch.stored("/index.m3u8") != nil)
        #expect(try keys.record(id)?.isStored == false)
        await fetch.shutdown()
        await origin.stop()
    }

    /// One AES-128 file addressed by byte ranges: every range is checked on its own (each has its own padding);
    /// a damaged range makes the item `corrupted` and the file is not kept; intact, the item completes.
    @Test func everyByteRangeOfAnAES128FileIsVerified() async throws {
        let dir = try await Streams.stream("aes128-byterange", { try FFmpeg.makeAES128ByteRange(in: $0) })
        let playlist = try String(contentsOf: dir.appendingPathComponent("index.m3u8"), encoding: .utf8)
        let ranges = playlist.split(separator: "\n").filter { $0.hasPrefix("#EXT-X-BYTERANGE:") }.map { line -> (Int, Int) in
            let spec = line.dropFirst("#EXT-X-BYTERANGE:".count).split(separator: "@")
            return (Int(spec[0])!, Int(spec[1])!)
        }
        #expect(ranges.count >= 3)
        #expect(playlist.contains("METHOD=AES-128"))
        let origin = TestOrigin(root: dir)
        try await origin.start()

        let fetch = try DownloaderHarness(origin: origin)
        let good = try await fetch.fetch("/index.m3u8", id: "intact")
        #expect(good.state == .cached, "\(good.errorCode ?? "") \(good.errorMessage ?? "")")
        #expect(try fetch.stored("/index.ts") != nil)
        await fetch.shutdown()

        // Damage the second range, not the file's end: flipping bits in its next-to-last ciphertext block flips
        // the same bits of its last plaintext byte (CBC), so the pad byte (1…16) becomes ≥ 0x4A: never valid.
        var body = [UInt8](try Data(contentsOf: dir.appendingPathComponent("index.ts")))
        let (length, offset) = ranges[1]
        body[offset + length - 17] ^= 0x5A
        origin.setBody(body, contentType: "video/mp2t", for: "/index.ts")
        let damaged = try DownloaderHarness(origin: origin)
        let item = try await damaged.fetch("/index.m3u8", id: "damaged")
        #expect(item.state == .failed)
        #expect(item.errorCode == "corrupted")
        #expect(item.errorMessage?.contains("bytes \(offset)-\(offset + length - 1)") == true, "\(item.errorMessage ?? "")")
        #expect(try damaged.stored("/index.ts") == nil, "the damaged file was kept")
        await damaged.shutdown()
        await origin.stop()
    }

    /// An origin answers the key with 200 and the wrong 16 bytes: the segments fail the check, and the key they
    /// failed with is dropped instead of staying "valid" for the whole key TTL. Once the origin is fixed, a
    /// `resume` fetches the key again and completes; the stored key is the right one.
    @Test func aWrongKeyIsDroppedSoAResumeFetchesTheRightOne() async throws {
        let (origin, fetch, right) = try await Self.originAnsweringAWrongKey()
        defer { Task { await fetch.shutdown() } }
        let keys = fetch.keys
        let id = keys.id(for: try OriginURL(fetch.url("/keys/key0.key")))

        let failed = try await fetch.fetch("/index.m3u8", id: "wrong-key", seconds: 4)
        #expect(failed.state == .failed)
        #expect(failed.errorCode == "corrupted", "\(failed.errorMessage ?? "")")
        let record = try #require(try keys.record(id))
        #expect(!record.isStored, "the key the segments failed with is still stored")
        #expect(keys.state(of: record) == .pending)
        #expect(record.lastError?.contains("segment") == true, "\(record.lastError ?? "")")
        #expect(try keys.storedKey(id) == nil, "the proxy would serve the wrong key")

        origin.setBody(nil, for: "/keys/key0.key")
        _ = try fetch.downloader.resume("wrong-key")
        let resumed = try await fetch.downloader.run("wrong-key")
        #expect(resumed.state == .partiallyCached, "\(resumed.errorCode ?? "") \(resumed.errorMessage ?? "")")
        #expect(try keys.storedKey(id) == right)
        await fetch.shutdown()
        await origin.stop()
    }

    /// A wrong key already in the key store (the proxy fetched it while the origin was answering it wrong) is
    /// found out by the first segment it fails, fetched again, and the same run completes with the origin's
    /// current key.
    @Test func aWrongStoredKeyIsReplacedWithinTheSameRun() async throws {
        let (origin, fetch, right) = try await Self.originAnsweringAWrongKey()
        defer { Task { await fetch.shutdown() } }
        let keys = fetch.keys
        let id = try keys.register(try OriginURL(fetch.url("/keys/key0.key")))
        let wrong = try await keys.key(id)
        #expect(wrong != right)
        #expect(try keys.storedKey(id) == wrong)

        origin.setBody(nil, for: "/keys/key0.key")
        let item = try await fetch.fetch("/index.m3u8", id: "stale-key", seconds: 4)
        #expect(item.state == .partiallyCached, "\(item.errorCode ?? "") \(item.errorMessage ?? "")")
        #expect(try keys.storedKey(id) == right)
        #expect(try fetch.stored("/p0/seg000.ts") != nil && fetch.stored("/p0/seg001.ts") != nil)
        await fetch.shutdown()
        await origin.stop()
    }

    /// An origin of the `aes128-rotation` stream that answers `/keys/key0.key` with 200 and 16 wrong bytes (until
    /// `setBody(nil, for:)`), a harness with a key store in front of it, and the right key.
    static func originAnsweringAWrongKey() async throws -> (TestOrigin, DownloaderHarness, right: [UInt8]) {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let right = [UInt8](try Data(contentsOf: aes.appendingPathComponent("keys/key0.key")))
        let origin = TestOrigin(root: aes)
        try await origin.start()
        origin.setBody(right.map { $0 ^ 0xA5 }, contentType: "application/octet-stream", for: "/keys/key0.key")
        return (origin, try DownloaderHarness(origin: origin), right)
    }

    /// A key two live items share stays stored while one of them remains.
    @Test func aKeySharedWithALiveItemIsKept() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let keys = fetch.keys
        _ = try await fetch.fetch("/index.m3u8", id: "first", seconds: 4)
        _ = try await fetch.fetch("/index.m3u8", id: "second", seconds: 4)
        let id = try #require(KeyID(try fetch.downloader.keyStatus(of: "first")[0].id))
        try fetch.downloader.remove("first", keepMetadata: false)
        #expect(try keys.record(id)?.isStored == true)
        #expect(try fetch.downloader.keyStatus(of: "second").map(\.state) == [.valid])
        await fetch.shutdown()
        await origin.stop()
    }

    /// Items sharing a key with different expiries: the key lasts as long as the latest of them, in either order
    /// (a short-lived second item does not cut the first's offline playback short, nor does a short-lived first
    /// one cap a longer second), and an item that never expires lifts the items' limit (the key TTL, 24 h by
    /// default, still applies).
    @Test func aSharedKeyLastsAsLongAsItsLongestLivedItem() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let keys = fetch.keys
        let now = Date()
        // Hours apart, and the shortest an hour away: a starved run took two minutes, and an item due in 60 s had expired
        // before it was looked at.
        let (minute, hour, twoHours) = (now.addingTimeInterval(3600), now.addingTimeInterval(7200), now.addingTimeInterval(10800))
        func expiry(_ harness: DownloaderHarness, _ id: String) throws -> TimeInterval? {
            let status = try harness.downloader.keyStatus(of: id)
            #expect(status.map(\.state) == [.valid])
            return status.first?.expiresAt?.timeIntervalSince1970
        }

        _ = try await fetch.fetch("/index.m3u8", id: "long", seconds: 4, expiresAt: hour)
        _ = try await fetch.fetch("/index.m3u8", id: "short", seconds: 4, expiresAt: minute)
        #expect(try expiry(fetch, "long") == hour.timeIntervalSince1970, "the short item leaves the long one's key alone")
        #expect(try expiry(fetch, "short") == hour.timeIntervalSince1970)
        let fetched = origin.requests(matching: "/keys/key0.key").count

        // A later, longer-lived item extends the stored copy without fetching it again.
        _ = try await fetch.fetch("/index.m3u8", id: "longer", seconds: 4, expiresAt: twoHours)
        #expect(try expiry(fetch, "short") == twoHours.timeIntervalSince1970)
        #expect(origin.requests(matching: "/keys/key0.key").count == fetched)
        // One that never expires lifts the items' limit: the key TTL is what is left.
        _ = try await fetch.fetch("/index.m3u8", id: "forever", seconds: 4)
        let id = try #require(KeyID(try fetch.downloader.keyStatus(of: "long")[0].id))
        let record = try #require(try keys.record(id))
        #expect(record.itemExpiresAt == nil)
        #expect(try expiry(fetch, "long") == record.fetchedExpiresAt?.timeIntervalSince1970)
        #expect(try #require(record.expiresAt) > now.addingTimeInterval(20 * 3600))

        // Short first, long second, in a fresh cache: the stored copy was fetched for the short item and is
        // extended to the long one's expiry.
        await fetch.shutdown()
        let again = try DownloaderHarness(origin: origin)
        defer { Task { await again.shutdown() } }
        _ = try await again.fetch("/index.m3u8", id: "short", seconds: 4, expiresAt: minute)
        _ = try await again.fetch("/index.m3u8", id: "long", seconds: 4, expiresAt: hour)
        #expect(try expiry(again, "short") == hour.timeIntervalSince1970)
        await again.shutdown()
        await origin.stop()
    }

    /// The longest-lived of the items sharing a key removed: the key is served as long as the items still holding
    /// it, not as long as the one that went. (Expiry cannot take the longest-lived holder first.)
    @Test func aSharedKeyIsCutBackWhenItsLongestLivedItemIsRemoved() async throws {
        let aes = try await Streams.stream("aes128-rotation", { try FFmpeg.makeAES128(in: $0) })
        let origin = TestOrigin(root: aes)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let now = Date()
        let (minute, hour) = (now.addingTimeInterval(3600), now.addingTimeInterval(7200))  // an hour apart, the first an hour away
        _ = try await fetch.fetch("/index.m3u8", id: "long", seconds: 4, expiresAt: hour)
        _ = try await fetch.fetch("/index.m3u8", id: "short", seconds: 4, expiresAt: minute)
        _ = try await fetch.fetch("/index.m3u8", id: "shorter", seconds: 4, expiresAt: now.addingTimeInterval(1800))
        // (Dates compared to the millisecond: they come back from SQLite as seconds since 1970.)
        func close(_ a: Date?, _ b: Date) -> Bool { a.map { abs($0.timeIntervalSince(b)) < 0.001 } ?? false }
        #expect(close(try fetch.downloader.keyStatus(of: "short").first?.expiresAt, hour))
        try fetch.downloader.remove("long", keepMetadata: false)
        let status = try fetch.downloader.keyStatus(of: "short")
        #expect(status.map(\.state) == [.valid])
        #expect(
            close(status.first?.expiresAt, minute),
            "the latest of the items still holding it: \(String(describing: status.first?.expiresAt))")
        await fetch.shutdown()
    }
}
