import Foundation
import HLSTestSupport
import Testing

@testable import HLSProxy

/// ffmpeg plays real streams through the proxy and must decode exactly what it decodes from the origin;
/// the second playback must not touch the origin for media.
@Suite(.serialized) struct PlaybackTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var name: String
        var playlist: String
        var make: @Sendable (URL) throws -> Void
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "ts-variants-audio-group", playlist: "master.m3u8", make: { try FFmpeg.makeTSVariants(in: $0) }),
        Case(name: "aes128-rotation", playlist: "index.m3u8", make: { try FFmpeg.makeAES128(in: $0) }),
        Case(name: "fmp4", playlist: "index.m3u8", make: { try FFmpeg.makeFMP4(in: $0) }),
        Case(name: "byterange", playlist: "index.m3u8", make: { try FFmpeg.makeByteRange(in: $0) }),
    ]

    /// A live window: ffmpeg starts at the first listed segment and gives up after one reload without news, so the
    /// run ends; the proxy must hand it exactly what the origin does.
    @Test func liveWindowDecodesIdentically() async throws {
        let dir = try await Streams.stream("live-window") { try FFmpeg.makeLiveWindow(in: $0) }
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }
        let options = ["-live_start_index", "0", "-m3u8_hold_counters", "1", "-max_reload", "1"]
        let direct = try await FFmpeg.frameMD5(harness.originURL("/live.m3u8"), extraArguments: options)
        #expect(direct.count >= 100, "three 2 s segments at 25 fps")
        let proxied = try await FFmpeg.frameMD5(harness.url("/live.m3u8"), extraArguments: options)
        #expect(proxied == direct)
        let response = try await harness.get(harness.url("/live.m3u8"))
        #expect(response.headers.first(name: "Cache-Control")?.hasPrefix("max-age=") == true, "live playlists are only briefly cacheable")
    }

    @Test(arguments: cases)
    func decodesIdenticallyAndSecondPlayIsServedFromDisk(_ testCase: Case) async throws {
        let dir = try await Streams.stream(testCase.name, testCase.make)
        let harness = try await ProxyHarness.start(serving: dir)
        defer { Task { await harness.shutdown() } }

        let direct = try await FFmpeg.frameMD5(harness.originURL("/" + testCase.playlist))
        #expect(direct.count > 50, "the stream should have frames")
        harness.origin.clearLog()

        let proxied = try await FFmpeg.frameMD5(harness.url("/" + testCase.playlist))
        #expect(proxied == direct)
        #expect(!harness.origin.requests.isEmpty, "the first playback goes to the origin")
        try await harness.waitForIdle()

        harness.origin.clearLog()
        let again = try await FFmpeg.frameMD5(harness.url("/" + testCase.playlist))
        #expect(again == direct)
        let media = harness.origin.requests.filter { !$0.path.hasSuffix(".m3u8") }
        #expect(media.isEmpty, "second playback fetched media from the origin: \(media.map(\.path))")
        #expect(harness.origin.requests.isEmpty, "VOD playlists are served from the cache too")
    }
}
