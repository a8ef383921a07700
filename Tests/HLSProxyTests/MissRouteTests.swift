import HLSCacheCore
import HLSCacheStore
import Testing

@testable import HLSProxy

/// The decisions of the miss path's entry point, without a channel: which download a request shares (``FetchKey``,
/// ``FetchTable``), how it is counted (``FetchJoin``), what the stored object means (``CacheLookup``) and how a miss
/// is answered (``MissRoute``).
@Suite struct MissRouteTests {
    static let url = try! OriginURL("https://cdn.example.com/v/seg1.ts?token=a")
    static let key = CacheKey(url)

    // MARK: FetchKey

    @Test func requestsThatDifferOnlyInTokensShareTheStoredDownload() throws {
        let other = try OriginURL("https://cdn.example.com/v/seg1.ts?token=b")
        #expect(FetchKey(key: Self.key, url: Self.url, cacheable: true) == FetchKey(key: CacheKey(other), url: other, cacheable: true))
        #expect(FetchKey(key: Self.key, url: Self.url, cacheable: true).isStored)
        #expect(FetchKey(key: Self.key, url: Self.url, cacheable: true).cacheKey == Self.key)
    }

    @Test func aRequestThatIsNotStoredNeverSharesTheStoredDownload() throws {
        let blocking = FetchKey(key: Self.key, url: Self.url, cacheable: false)
        #expect(blocking != .stored(Self.key))
        #expect(!blocking.isStored)
        #expect(blocking.cacheKey == nil)
        // Per request: only the same URL shares it, other tokens do not.
        #expect(blocking == .perRequest(Self.url))
        #expect(blocking != .perRequest(try OriginURL("https://cdn.example.com/v/seg1.ts?token=b")))
    }

    @Test func aPerRequestKeyIsNotTheStoredKeyOfTheSameText() throws {
        // The URL string and the cache key string are the same text here; the kinds still differ.
        let plain = try OriginURL("https://cdn.example.com/v/seg1.ts")
        #expect(FetchKey.perRequest(plain) != FetchKey.stored(CacheKey(plain)))
    }

    // MARK: FetchTable, FetchJoin

    final class Download {}

    @Test func theFirstRequestStartsADownloadAndTheNextOnesJoinIt() {
        var table = FetchTable<Download>()
        var made = 0
        let first = table.join(.stored(Self.key)) {
            made += 1
            return Download()
        }
        let second = table.join(.stored(Self.key)) {
            made += 1
            return Download()
        }
        #expect(first.isStarted)
        #expect(!second.isStarted)
        #expect(first.fetch === second.fetch)
        #expect(made == 1)
        #expect(table.count == 1)
        #expect(table.existing(.stored(Self.key)) === first.fetch)
        #expect(table.existing(.perRequest(Self.url)) == nil)
    }

    @Test func aDownloadThatEndedIsReplacedAndItsLateRemovalLeavesTheNewOne() {
        var table = FetchTable<Download>()
        let old = table.join(.stored(Self.key)) { Download() }.fetch
        table.remove(old)
        #expect(table.count == 0)
        let new = table.join(.stored(Self.key)) { Download() }
        #expect(new.isStarted)
        #expect(new.fetch !== old)
        // The old download reports its end once more (its commit after a failure, say): the new one stays.
        table.remove(old)
        #expect(table.existing(.stored(Self.key)) === new.fetch)
    }

    /// A miss notes the removals before its store lookup; a download that ended meanwhile (it stored its object, then
    /// left) sends it back to the store instead of starting a second download. One in flight is joined all the same,
    /// and a removal of something not in the table (a late second report) does not count.
    @Test func aDownloadThatEndedDuringTheLookupSendsTheMissBackToTheStore() {
        var table = FetchTable<Download>()
        let other = CacheKey(storedValue: "other")
        let seen = table.removals
        let ended = table.join(.stored(other)) { Download() }.fetch
        table.remove(ended)
        #expect(table.join(.stored(Self.key), unlessRemovedSince: seen) { Download() } == nil)
        #expect(table.count == 0)
        table.remove(ended)
        let fresh = table.removals
        #expect(fresh == seen + 1)
        let started = try? #require(table.join(.stored(Self.key), unlessRemovedSince: fresh) { Download() })
        #expect(started?.isStarted == true)
        #expect(table.join(.stored(Self.key), unlessRemovedSince: seen) { Download() }?.fetch === started?.fetch)
    }

    @Test func storedAndPerRequestDownloadsOfOneResourceAreSeparate() {
        var table = FetchTable<Download>()
        let stored = table.join(.stored(Self.key)) { Download() }
        let blocking = table.join(.perRequest(Self.url)) { Download() }
        #expect(stored.isStarted && blocking.isStarted)
        #expect(stored.fetch !== blocking.fetch)
        #expect(table.count == 2)
        #expect(table.existing(.stored(Self.key)) === stored.fetch && table.existing(.perRequest(Self.url)) === blocking.fetch)
    }

    @Test func howARequestIsCounted() {
        let download = Download()
        #expect(FetchJoin.started(download).cacheResult(stored: true) == .miss)
        #expect(FetchJoin.joined(download).cacheResult(stored: true) == .coalesced)
        #expect(FetchJoin.started(download).cacheResult(stored: false) == .passthrough)
        #expect(FetchJoin.joined(download).cacheResult(stored: false) == .passthrough)
    }

    // MARK: CacheLookup

    @Test func whatAStoredObjectMeans() {
        #expect(
            CacheLookup.classify(kind: .segment, size: 1000) {
                Issue.record("asked for media"); return true
            } == .object)
        #expect(CacheLookup.classify(kind: .playlist, size: 1000) { false } == .playlist)
        #expect(CacheLookup.classify(kind: .playlist, size: 1000) { true } == .playlistForOtherTokens)
        // A key-sized object is a key an older version kept in clear: dropped (keys have a sealed store).
        #expect(CacheLookup.classify(kind: .segment, size: 16) { false } == .keySizedLeftover)
        #expect(CacheLookup.classify(kind: .key, size: 32) { false } == .keySizedLeftover)
        // A 16-byte playlist is a playlist.
        #expect(CacheLookup.classify(kind: .playlist, size: 16) { false } == .playlist)
    }

    // MARK: MissRoute

    static func decide(
        _ range: String?, head: Bool = false, ext: String? = "ts", cacheable: Bool = true, _ inFlight: MissRoute.InFlight? = nil
    )
        -> MissRoute
    {
        MissRoute.decide(range: range, isHead: head, pathExtension: ext, cacheable: cacheable, inFlight: inFlight)
    }

    static func streaming(length: Int64? = 10_000, received: Int64, servableFrom: Int64 = 0, failed: Bool = false) -> MissRoute.InFlight {
        MissRoute.InFlight(mediaLength: length, received: received, servableFrom: servableFrom, failed: failed)
    }

    @Test func aWholeRequestGoesToTheSharedDownloadAfterTheSlices() {
        #expect(Self.decide(nil) == .whole(trySlices: true))
        // ffmpeg's "bytes=0-" is the whole file.
        #expect(Self.decide("bytes=0-") == .whole(trySlices: true))
        #expect(Self.decide(" BYTES=0- ") == .whole(trySlices: true))
        // A download in flight serves it: no slices.
        #expect(Self.decide(nil, Self.streaming(received: 10)) == .whole(trySlices: false))
        // Not stored: no slices either.
        #expect(Self.decide(nil, cacheable: false) == .whole(trySlices: false))
    }

    @Test func aPlaylistIsAlwaysAnsweredWholeAndNeverFromSlices() {
        #expect(Self.decide("bytes=100-200", ext: "m3u8") == .whole(trySlices: false))
        #expect(Self.decide(nil, ext: "m3u8") == .whole(trySlices: false))
    }

    @Test func aHeadRequestWithARangeIsAnsweredWhole() {
        #expect(Self.decide("bytes=100-200", head: true) == .whole(trySlices: true))
    }

    @Test func aRangeJoinsTheDownloadInFlightOnlyWhenItHasTheRangesStart() {
        #expect(Self.decide("bytes=100-199", Self.streaming(received: 100)) == .joinRange(first: 100, last: 199))
        #expect(Self.decide("bytes=100-", Self.streaming(received: 5000)) == .joinRange(first: 100, last: 9999))
        // Not there yet: the range is relayed on its own (the download in flight fills the cache: no slices).
        #expect(Self.decide("bytes=100-199", Self.streaming(received: 99)) == .rangeRelay)
        // Gone from memory and not on disk.
        #expect(Self.decide("bytes=100-199", Self.streaming(received: 5000, servableFrom: 101)) == .rangeRelay)
        #expect(Self.decide("bytes=100-199", Self.streaming(received: 5000, servableFrom: 100)) == .joinRange(first: 100, last: 199))
    }

    @Test func aRangeDoesNotJoinADownloadThatFailedOrWhoseLengthIsUnknown() {
        #expect(Self.decide("bytes=0-99", Self.streaming(received: 5000, failed: true)) == .rangeRelay)
        #expect(Self.decide("bytes=0-99", Self.streaming(length: nil, received: 5000)) == .rangeRelay)
        // Several ranges cannot be joined: relayed.
        #expect(Self.decide("bytes=0-9,20-29", Self.streaming(received: 5000)) == .rangeRelay)
        // With nothing in flight, a range of a cacheable resource goes to the slices.
        #expect(Self.decide("bytes=0-99") == .rangeFromSlices)
    }

    @Test func aRangeBeyondTheKnownSizeIsNotSatisfiable() {
        #expect(Self.decide("bytes=20000-", Self.streaming(received: 5000)) == .rangeNotSatisfiable(size: 10_000))
        // Without a download in flight the size is not known here: the slices or the origin answer.
        #expect(Self.decide("bytes=20000-") == .rangeFromSlices)
    }

    @Test func aRangeOfARequestThatIsNotStoredIsRelayed() {
        #expect(Self.decide("bytes=100-199", cacheable: false) == .rangeRelay)
        #expect(Self.decide("bytes=100-199", cacheable: false, Self.streaming(received: 5000)) == .joinRange(first: 100, last: 199))
    }
}
