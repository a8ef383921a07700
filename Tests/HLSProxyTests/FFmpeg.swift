import Foundation
import Testing

/// Real HLS streams made by ffmpeg for the tests, and ffmpeg as a real player (`-f framemd5`).
enum FFmpeg {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs a program and returns stdout; throws with stderr when it fails.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval = 120) throws -> (stdout: Data, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let errData = NIOSafeBox<Data>()
        let reader = Thread { errData.value = err.fileHandleForReading.readDataToEndOfFile() }
        reader.start()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !reader.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        let stderr = String(decoding: errData.value ?? Data(), as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw Failure(description: "\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(stderr.suffix(1500))")
        }
        return (stdout, stderr)
    }

    static let ffmpeg = "/usr/bin/ffmpeg"

    /// Decodes `url` and returns the per-frame MD5 lines (comments dropped), as a player would see the content.
    ///
    /// ffmpeg runs on a thread of its own: waiting for it on the cooperative pool (two threads on a 2-core
    /// machine) would starve the server's async work — such as fetching a key — that ffmpeg itself waits for.
    static func frameMD5(_ url: String, extraArguments: [String] = []) async throws -> [String] {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        let (stdout, _) = try run(
                            ffmpeg,
                            ["-hide_banner", "-loglevel", "error", "-nostdin"] + extraArguments + ["-i", url, "-map", "0", "-f", "framemd5", "-"])
                        return String(decoding: stdout, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
                    })
            }
        }
    }

    private static let base = ["-hide_banner", "-loglevel", "error", "-nostdin", "-y"]
    private static func video(_ seconds: Int, size: String = "320x180") -> [String] {
        ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25:duration=\(seconds)"]
    }
    private static func audio(_ seconds: Int) -> [String] { ["-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds)"] }
    private static let h264 = ["-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p"]

    /// Clear TS: a master playlist with two video variants and an audio group (`master.m3u8`).
    static func makeTSVariants(in dir: URL, seconds: Int = 8) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try run(
            ffmpeg,
            base + video(seconds) + audio(seconds) + [
                "-map", "0:v", "-map", "0:v", "-map", "1:a",
                "-filter:v:1", "scale=160:90",
            ] + h264 + [
                "-c:a", "aac", "-b:a", "64k", "-b:v:0", "400k", "-b:v:1", "150k",
                "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod",
                "-master_pl_name", "master.m3u8",
                "-var_stream_map", "v:0,agroup:aud v:1,agroup:aud a:0,agroup:aud,language:en,name:english,default:yes",
                "-hls_segment_filename", dir.path + "/v%v/seg%03d.ts", dir.path + "/v%v/index.m3u8",
            ])
    }

    /// AES-128 TS with a new key every 2 segments (`index.m3u8`, keys `key0.key`…).
    static func makeAES128(in dir: URL, seconds: Int = 10) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        // Rotating keys with periodic_rekey needs the key info file rewritten while ffmpeg runs; making one
        // chunk per key and stitching the playlists gives the same playlist shape deterministically.
        var lines: [String] = ["#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:0", "#EXT-X-PLAYLIST-TYPE:VOD"]
        let parts = max(1, seconds / 4)
        for part in 0..<parts {
            let key = (0..<16).map { _ in UInt8.random(in: 0...255) }
            let keyFile = dir.appendingPathComponent("key\(part).key")
            try Data(key).write(to: keyFile)
            let iv = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            let info = dir.appendingPathComponent("keyinfo\(part).txt")
            try "key\(part).key\n\(keyFile.path)\n\(iv)\n".write(to: info, atomically: true, encoding: .utf8)
            let partDir = dir.appendingPathComponent("p\(part)")
            try FileManager.default.createDirectory(at: partDir, withIntermediateDirectories: true)
            try run(
                ffmpeg,
                base + video(4) + h264 + [
                    "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_key_info_file", info.path,
                    "-hls_segment_filename", partDir.path + "/seg%03d.ts", partDir.path + "/index.m3u8",
                ])
            let playlist = try String(contentsOf: partDir.appendingPathComponent("index.m3u8"), encoding: .utf8)
            for line in playlist.split(separator: "\n") where !line.hasPrefix("#EXTM3U") && !line.hasPrefix("#EXT-X-VERSION")
                && !line.hasPrefix("#EXT-X-TARGETDURATION") && !line.hasPrefix("#EXT-X-MEDIA-SEQUENCE") && !line.hasPrefix("#EXT-X-PLAYLIST-TYPE")
                && !line.hasPrefix("#EXT-X-ENDLIST")
            {
                if line.hasPrefix("#EXT-X-KEY") {
                    lines.append(String(line).replacingOccurrences(of: "URI=\"key\(part).key\"", with: "URI=\"keys/key\(part).key\""))
                } else if line.hasPrefix("#") {
                    lines.append(String(line))
                } else {
                    lines.append("p\(part)/\(line)")
                }
            }
            if part < parts - 1 { lines.append("#EXT-X-DISCONTINUITY") }
        }
        lines.append("#EXT-X-ENDLIST")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("keys"), withIntermediateDirectories: true)
        for part in 0..<parts {
            try FileManager.default.moveItem(
                at: dir.appendingPathComponent("key\(part).key"), to: dir.appendingPathComponent("keys/key\(part).key"))
        }
        try (lines.joined(separator: "\n") + "\n").write(to: dir.appendingPathComponent("index.m3u8"), atomically: true, encoding: .utf8)
    }

    /// fMP4 segments with an EXT-X-MAP init section (`index.m3u8`).
    static func makeFMP4(in dir: URL, seconds: Int = 6) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try run(
            ffmpeg,
            base + video(seconds) + h264 + [
                "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4",
                "-hls_fmp4_init_filename", "init.mp4", "-hls_segment_filename", dir.path + "/seg%03d.m4s", dir.path + "/index.m3u8",
            ])
    }

    /// One TS file addressed with EXT-X-BYTERANGE (`index.m3u8`, `index.ts`).
    static func makeByteRange(in dir: URL, seconds: Int = 6) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try run(
            ffmpeg,
            base + video(seconds) + h264 + [
                "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_flags", "single_file", dir.path + "/index.m3u8",
            ])
    }
}

/// A mutable box for handing a value out of a thread.
final class NIOSafeBox<T>: @unchecked Sendable {
    var value: T?
}

/// Streams generated once per test process, shared by the suites.
enum Streams {
    static let root: URL = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-streams-\(getpid())")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }()

    private static let made = NIOSafeLock()

    /// Makes the stream `name` with `maker` unless it exists; returns its directory.
    static func stream(_ name: String, _ maker: (URL) throws -> Void) throws -> URL {
        try made.withLock {
            let dir = root.appendingPathComponent(name)
            if !FileManager.default.fileExists(atPath: dir.appendingPathComponent(".done").path) {
                try? FileManager.default.removeItem(at: dir)
                try maker(dir)
                _ = FileManager.default.createFile(atPath: dir.appendingPathComponent(".done").path, contents: Data())
            }
            return dir
        }
    }
}

final class NIOSafeLock: @unchecked Sendable {
    private let lock = NSLock()
    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}
