import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSKeys
import HLSOrigin
import HLSTestSupport
import Logging
import NIOPosix
import Testing

@testable import HLSProxy

/// The in-memory tables of ``PlaylistService`` hold rules, not just speed-ups: which playlists were live (an ended one
/// is still not stored for good) and how long a live playlist's segments may be kept. Full, a table must forget the
/// entries nobody uses, never the ones of the stream being played (issue 29: the tables used to empty themselves).
@Suite struct PlaylistTablesTests {
    /// The service on a temporary cache with its key store (keys.sqlite, fetching through `origin`).
    private static func service(_ limits: PlaylistService.TableLimits, origin: OriginClient) throws -> (PlaylistService, CacheStore) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-tables-\(UUID().uuidString)").path
        let store = try CacheStore.open(directory: directory, maxBytes: 1 << 30, freeDiskCushion: 0)
        var logger = Logger(label: "hlscache-test")
        logger.logLevel = .error
        let keys = try KeyService(
            directory: directory, configuration: KeyConfiguration(), masterKey: try MasterKey.load(directory: directory, environment: [:]),
            fetcher: origin, logger: logger)
        let metrics = ProxyMetrics()
        let service = PlaylistService(
            configuration: ProxyConfiguration(cacheDirectory: directory), store: store, keys: keys, cookies: origin.cookies, logger: logger,
            metrics: metrics,
            writeFailures: CacheWriteFailureLog(metrics: metrics, logger: logger), limits: limits)
        return (service, store)
    }

    private static func origin() -> OriginClient {
        OriginClient(
            eventLoopGroup: MultiThreadedEventLoopGroup.singleton, configuration: OriginConfiguration(),
            logger: Logger(label: "hlscache-test"))
    }

    /// A media playlist of `segments` segments named `name`-N.ts, live or ended.
    private static func playlist(_ name: String, segments: Int, ended: Bool = false, sequence: Int = 0) -> [UInt8] {
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:\(sequence)\n"
        for index in sequence..<(sequence + segments) { text += "#EXTINF:4.0,\n\(name)-\(index).ts\n" }
        if ended { text += "#EXT-X-ENDLIST\n" }
        return Array(text.utf8)
    }

    private static func url(_ path: String) throws -> OriginURL { try OriginURL("http://origin.test/live/\(path)") }

    /// A player reloads live playlist A while other live playlists come and go, more than the table holds; then A ends.
    /// A was live in this process, so its ended version is still served from memory and never stored on disk as VOD.
    @Test func anEndedLivePlaylistKeepsItsRulesWhenTheTableIsFull() async throws {
        var limits = PlaylistService.TableLimits()
        limits.livePlaylists = 8
        let origin = Self.origin()
        defer { Task { try? await origin.shutdown() } }
        let (service, store) = try Self.service(limits, origin: origin)
        defer { store.close() }
        let a = try Self.url("a.m3u8")
        let keyA = CacheKey(a)
        for round in 0..<(3 * limits.livePlaylists) {
            let reloaded = try service.process(raw: Self.playlist("a", segments: 3, sequence: round), key: keyA, url: a, store: true)
            #expect(reloaded.isLive)
            for other in 0..<2 {
                let b = try Self.url("b\(round)-\(other).m3u8")
                _ = try service.process(raw: Self.playlist("b\(round)-\(other)", segments: 3), key: CacheKey(b), url: b, store: true)
            }
            let ended = try service.process(
                raw: Self.playlist("a", segments: 3, ended: true, sequence: round), key: keyA, url: a, store: true)
            #expect(ended.isLive, "round \(round): the ended live playlist was taken for VOD")
            #expect(store.lookup(keyA) == nil, "round \(round): the ended live playlist was stored on disk")
            #expect(store.lookup(PlaylistService.rewrittenKey(keyA)) == nil)
        }
        // A playlist never seen live is VOD: stored.
        let vod = try Self.url("vod.m3u8")
        #expect(!(try service.process(raw: Self.playlist("v", segments: 3, ended: true), key: CacheKey(vod), url: vod, store: true)).isLive)
        #expect(store.lookup(CacheKey(vod)) != nil)
    }

    /// The segments of the live playlist a player reloads keep their expiry while other live playlists fill the table.
    @Test func aLiveSegmentKeepsItsExpiryWhenTheTableIsFull() async throws {
        var limits = PlaylistService.TableLimits()
        limits.liveResources = 10
        let origin = Self.origin()
        defer { Task { try? await origin.shutdown() } }
        let (service, store) = try Self.service(limits, origin: origin)
        defer { store.close() }
        let a = try Self.url("a.m3u8")
        let segmentA = CacheKey(try Self.url("a-1.ts"))
        for round in 0..<30 {
            // A names 3 segments, each other playlist 4: together 7 of the 10 the table holds.
            _ = try service.process(raw: Self.playlist("a", segments: 3), key: CacheKey(a), url: a, store: true)
            let b = try Self.url("b\(round).m3u8")
            _ = try service.process(raw: Self.playlist("b\(round)", segments: 4), key: CacheKey(b), url: b, store: true)
            let expiry = try #require(
                service.liveExpiry(of: segmentA), "round \(round): a segment of the playing live stream lost its expiry")
            // Window (3 × 4 s) plus two target durations.
            #expect(abs(expiry.timeIntervalSinceNow - 20) < 5)
        }
        // The least recently used went: the first other playlist's segments.
        #expect(service.liveExpiry(of: CacheKey(try Self.url("b0-0.ts"))) == nil)
        #expect(service.liveExpiry(of: CacheKey(try Self.url("b29-0.ts"))) != nil)
    }
}
