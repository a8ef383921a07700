import Foundation
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

    @Test(arguments: cases)
    func decodesIdenticallyAndSecondPlayIsServedFromDisk(_ testCase: Case) async throws {
        let dir = try Streams.stream(testCase.name, testCase.make)
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
