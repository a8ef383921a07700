import Foundation
import HLSTestSupport

/// The ffmpeg-made playlists in `Fixtures/` (see `scripts/make-playlist-fixtures.sh`), loaded through `#filePath`
/// so the test target needs no resources.
enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    static let names = [
        "aes128-rotation.m3u8", "clear-ts.m3u8", "event.m3u8", "fmp4.m3u8", "live-window.m3u8", "master-audio.m3u8",
        "master-hi.m3u8", "master-lo.m3u8", "master.m3u8", "single-file.m3u8",
    ]

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: directory.appendingPathComponent(name)))
    }

    static func text(_ name: String) throws -> String {
        String(decoding: try bytes(name), as: UTF8.self)
    }

    /// The `.m3u8` files actually in the folder, sorted.
    static func namesOnDisk() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".m3u8") }.sorted()
    }

    /// Where the fixture would live on an origin.
    static func baseURL(_ name: String) -> String {
        "https://cdn.example.com/vod/show/\(name)"
    }
}
