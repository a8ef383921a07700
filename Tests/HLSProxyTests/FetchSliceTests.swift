import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSTestSupport
import Testing

/// `hlscache fetch --seconds 10` of a single-file `EXT-X-BYTERANGE` stream larger than its slice threshold stores
/// only the slices its first 10 seconds cover, and those seconds play offline through the proxy (issue 32).
@Suite struct FetchSliceTests {
    /// The byte ranges of the segments starting before `seconds`, and of every segment, read from the playlist
    /// independently of the engine (explicit offsets: ffmpeg writes them).
    static func ranges(_ playlist: URL, before seconds: Double) throws -> (selected: [(Int64, Int64)], all: [(Int64, Int64)]) {
        let text = try String(contentsOf: playlist, encoding: .utf8)
        var start = 0.0
        var duration = 0.0
        var selected: [(Int64, Int64)] = []
        var all: [(Int64, Int64)] = []
        for line in text.split(separator: "\n") {
            if line.hasPrefix("#EXTINF:") {
                duration = Double(line.dropFirst(8).split(separator: ",")[0]) ?? 0
            } else if line.hasPrefix("#EXT-X-BYTERANGE:") {
                let parts = line.dropFirst(17).split(separator: "@")
                let range = (Int64(parts[1])!, Int64(parts[0])!)
                all.append(range)
                if start < seconds { selected.append(range) }
                start += duration
            }
        }
        return (selected, all)
    }

    @Test func tenSecondsOfASingleFileStreamAreStoredAsTheirSlicesAndPlayOffline() async throws {
        let dir = try await Streams.stream("byterange-30s", { try FFmpeg.makeByteRange(in: $0, seconds: 30) })
        let file = try #require(FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("index.ts").path)[.size] as? Int)
        let layout = SliceLayout(sliceSize: 64 << 10)
        #expect(layout.isSliced(total: Int64(file)), "the file (\(file) bytes) is past the threshold of 64 KiB slices")
        let origin = TestOrigin(root: dir)
        origin.setETag("\"single-1\"", for: "/index.ts")
        try await origin.start()
        let port = origin.port
        let fetch = try DownloaderHarness(origin: origin, configure: { $0.sliceSize = layout.sliceSize })
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/index.m3u8", seconds: 10)
        #expect(item.state == .partiallyCached)
        #expect(item.errorCode == nil)

        // Exactly the slices the first 10 s cover, each with the file's bytes; none after them.
        let (selected, all) = try Self.ranges(dir.appendingPathComponent("index.m3u8"), before: 10)
        #expect(selected.count == 5 && all.count == 15, "2 s segments")
        var wanted = Set<Int64>()
        for (offset, length) in selected { wanted.formUnion(layout.index(of: offset)...layout.index(of: offset + length - 1)) }
        let original = try [UInt8](Data(contentsOf: dir.appendingPathComponent("index.ts")))
        let fileKey = try fetch.key("/index.ts")
        #expect(fetch.store.lookup(fileKey) == nil, "not stored whole")
        for index in 0..<layout.count(total: Int64(file)) {
            let stored = fetch.store.lookup(layout.key(of: fileKey, slice: index))
            if wanted.contains(index) {
                let object = try #require(stored, "slice \(index) is stored")
                let bytes = layout.bytes(of: index, total: Int64(file))
                #expect(
                    FileManager.default.contents(atPath: object.path).map { [UInt8]($0) }
                        == Array(original[Int(bytes.first)...Int(bytes.last)]))
            } else {
                #expect(stored == nil, "slice \(index) is past the first 10 s")
            }
        }
        #expect(wanted.count < layout.count(total: Int64(file)) / 2)
        let fileRequests = origin.requests(matching: "/index.ts")
        #expect(fileRequests.count == wanted.count, "one Range request per slice")
        #expect(fileRequests.allSatisfy { request in request.headers.contains { $0.0.lowercased() == "range" } })

        // Reference decode while the origin is up; then the origin goes away and the proxy serves the 10 s.
        let direct = try await FFmpeg.frameMD5(origin.baseURL + "/index.m3u8", extraArguments: ["-t", "9.9"])
        #expect(direct.count > 200)
        await fetch.shutdown(keepingCache: true)
        await origin.stop()
        let proxy = try await ProxyHarness.start(origin: TestOrigin(root: dir)) {
            $0.cacheDirectory = fetch.cacheDirectory.path
            $0.sliceSize = layout.sliceSize
        }
        let offline = try await FFmpeg.frameMD5("\(proxy.base)/http/127.0.0.1:\(port)/index.m3u8", extraArguments: ["-t", "9.9"])
        #expect(offline == direct, "the first 9.9 s decode identically with the origin stopped")
        await proxy.shutdown()
        try? FileManager.default.removeItem(at: fetch.cacheDirectory)
    }
}
