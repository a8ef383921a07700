import Foundation
import HLSCrypto

/// A live HLS origin that moves when the test lets it: one-second MPEG-TS segments made once by ffmpeg from one
/// continuous encode, listed `listSize` at a time in `live.m3u8` (and under each of `alsoAs`, the same text), with
/// program date-times; with `rotateKeysEvery`, AES-128 with a new key every N segments (the IV each segment's sequence
/// number, written out, as ffmpeg does). Serve `dir` with a ``TestOrigin``.
///
/// Unlike ``LiveStream`` (ffmpeg in real time), the window moves one segment per ``step(every:when:)`` interval only
/// while the test's gate holds — e.g. "the viewer holds every segment listed" — so a loaded machine that stalls a
/// viewer or a recorder slows the channel down instead of moving it past them. A segment's file appears before the
/// playlist names it; unless `keepSegments`, it is deleted once two segments out of the window (ffmpeg keeps one too).
package final class SteppedLiveStream: @unchecked Sendable {
    package let dir: URL
    package let listSize: Int
    /// The clear segments (`seg00000.ts` …) of the one encode every stepped stream shares: the reference.
    package let source: URL
    private let names: [String]
    private let rotateKeysEvery: Int?
    private let keepSegments: Bool
    private let playlists: [String]
    private let start = Date(timeIntervalSince1970: 1_800_000_000)
    private let lock = NSLock()
    private var head = -1
    private var ended = false
    private var held = false
    private var ticker: Task<Void, Never>?

    /// The number of segments the shared encode has: a stream stops moving at its last one.
    package static let segmentCount = 150

    /// A stream listing its first `initial` segments.
    package init(
        in dir: URL, listSize: Int, rotateKeysEvery: Int? = nil, keepSegments: Bool = false, alsoAs: [String] = [], initial: Int = 2
    ) async throws {
        self.dir = dir
        self.listSize = listSize
        self.rotateKeysEvery = rotateKeysEvery
        self.keepSegments = keepSegments
        self.playlists = ["live.m3u8"] + alsoAs
        source = try await Streams.stream("stepped-live-source") { dir in
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try FFmpeg.run(
                FFmpeg.ffmpeg,
                [
                    "-hide_banner", "-loglevel", "error", "-nostdin", "-f", "lavfi", "-i",
                    "testsrc2=size=160x90:rate=25:duration=\(Self.segmentCount)", "-c:v", "libx264", "-preset", "ultrafast", "-g", "25",
                    "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p", "-f", "hls", "-hls_time", "1", "-hls_list_size", "0",
                    "-hls_segment_filename", dir.path + "/seg%05d.ts", dir.path + "/all.m3u8",
                ])
        }
        names = (0..<Self.segmentCount).map { String(format: "seg%05d.ts", $0) }
        for name in names where !FileManager.default.fileExists(atPath: source.appendingPathComponent(name).path) {
            throw FFmpeg.Failure(description: "the stepped stream's source lacks \(name)")
        }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for _ in 0..<initial { try advance() }
    }

    /// The newest segment listed (its sequence number).
    package var newest: Int { lock.withLock { head } }

    /// The segment names the playlist lists now, oldest first.
    package var window: [String] { lock.withLock { Array(names[max(0, head - listSize + 1)...max(head, 0)]) } }

    /// Lists the next segment (its file, and its key's, written first); false once the encode has no more.
    @discardableResult
    package func advance() throws -> Bool {
        let next = lock.withLock { head + 1 }
        guard next < names.count else { return false }
        try writeSegment(next)
        let text = lock.withLock { () -> String in
            head = next
            return playlistText()
        }
        try publish(text)
        if !keepSegments, next - listSize - 2 >= 0 {
            try? FileManager.default.removeItem(at: dir.appendingPathComponent(names[next - listSize - 2]))
        }
        return true
    }

    /// Moves the window one segment every `interval` while `gate` (given the newest sequence) holds and the stream is
    /// not ``hold()``-ing, until ``stop()`` or ``kill()``.
    package func step(every interval: Duration = .seconds(1), when gate: @escaping @Sendable (Int) -> Bool = { _ in true }) {
        let task = Task { [self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                while !Task.isCancelled, lock.withLock({ held }) || !gate(newest) {
                    try? await Task.sleep(for: .milliseconds(50))
                }
                if Task.isCancelled || (try? advance()) != true { return }
            }
        }
        lock.withLock { ticker = task }
    }

    /// Stops moving for good (the window stays as it is, the stream live, its end not written).
    package func hold() { lock.withLock { held = true } }

    /// Ends the stream as an encoder does: `EXT-X-ENDLIST` after the last segment listed.
    package func stop() async throws {
        await halt()
        let text = lock.withLock { () -> String in
            ended = true
            return playlistText()
        }
        try publish(text)
    }

    /// Stops moving, no end written: an origin that just stops updating.
    package func kill() async { await halt() }

    private func halt() async {
        let task = lock.withLock { ticker }
        task?.cancel()
        await task?.value
    }

    deinit { ticker?.cancel() }

    /// The key of segment `sequence` and its file name, when encrypted.
    private func key(of sequence: Int) -> (name: String, bytes: [UInt8])? {
        guard let every = rotateKeysEvery else { return nil }
        let index = sequence / every
        // A fixed key per index: the same stream encrypts the same way in every run, and a wrong key is still wrong.
        return ("key\(index).key", (0..<16).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ index &* 101 &+ 7) })
    }

    private static func iv(_ sequence: Int) -> [UInt8] {
        [UInt8](repeating: 0, count: 8) + (0..<8).map { UInt8(truncatingIfNeeded: UInt64(sequence) >> (56 - 8 * UInt64($0))) }
    }

    private func writeSegment(_ sequence: Int) throws {
        let clear = try Data(contentsOf: source.appendingPathComponent(names[sequence]))
        let target = dir.appendingPathComponent(names[sequence])
        guard let key = key(of: sequence) else {
            try clear.write(to: target, options: .atomic)
            return
        }
        try Data(key.bytes).write(to: dir.appendingPathComponent(key.name), options: .atomic)
        try Data(AES128CBC.encrypt([UInt8](clear), key: key.bytes, iv: Self.iv(sequence))).write(to: target, options: .atomic)
    }

    /// The playlist for the current window (under the lock).
    private func playlistText() -> String {
        let first = max(0, head - listSize + 1)
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:1\n#EXT-X-MEDIA-SEQUENCE:\(first)\n"
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for sequence in first...head {
            if let key = key(of: sequence) {
                let hex = Self.iv(sequence).map { String(format: "%02x", $0) }.joined()
                text += "#EXT-X-KEY:METHOD=AES-128,URI=\"\(key.name)\",IV=0x\(hex)\n"
            }
            text += "#EXT-X-PROGRAM-DATE-TIME:\(formatter.string(from: start.addingTimeInterval(Double(sequence))))\n"
            text += "#EXTINF:1.000000,\n\(names[sequence])\n"
        }
        if ended { text += "#EXT-X-ENDLIST\n" }
        return text
    }

    private func publish(_ text: String) throws {
        for name in playlists { try Data(text.utf8).write(to: dir.appendingPathComponent(name), options: .atomic) }
    }
}
