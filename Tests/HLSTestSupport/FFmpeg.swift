import Foundation

/// Real HLS streams made by ffmpeg for the tests, and ffmpeg as a real player (`-f framemd5`).
package enum FFmpeg {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// Runs a program and returns stdout; throws with stderr when it fails.
    @discardableResult
    package static func run(_ executable: String, _ arguments: [String], timeout: TimeInterval = 120) throws -> (
        stdout: Data, stderr: String
    ) {
        let process = ChildProcess()
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
            throw Failure(
                description: "\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus): \(stderr.suffix(1500))"
            )
        }
        return (stdout, stderr)
    }

    package static let ffmpeg = "/usr/bin/ffmpeg"

    /// Decodes `url` and returns the per-frame MD5 lines (comments dropped), as a player would see the content.
    package static func frameMD5(_ url: String, extraArguments: [String] = []) async throws -> [String] {
        let (stdout, _) = try await offThread {
            try run(
                ffmpeg,
                ["-hide_banner", "-loglevel", "error", "-nostdin"] + extraArguments + ["-i", url, "-map", "0", "-f", "framemd5", "-"])
        }
        return String(decoding: stdout, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
    }

    private static let base = ["-hide_banner", "-loglevel", "error", "-nostdin", "-y"]
    private static func video(_ seconds: Int, size: String = "320x180") -> [String] {
        ["-f", "lavfi", "-i", "testsrc2=size=\(size):rate=25:duration=\(seconds)"]
    }
    private static func audio(_ seconds: Int) -> [String] { ["-f", "lavfi", "-i", "sine=frequency=440:duration=\(seconds)"] }
    private static let h264 = [
        "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p",
    ]

    /// Clear TS: a master playlist with two video variants and an audio group (`master.m3u8`).
    package static func makeTSVariants(in dir: URL, seconds: Int = 8) throws {
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
    package static func makeAES128(in dir: URL, seconds: Int = 10) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        // Rotating keys with periodic_rekey needs the key info file rewritten while ffmpeg runs; making one
        // chunk per key and stitching the playlists gives the same playlist shape deterministically.
        var lines: [String] = [
            "#EXTM3U", "#EXT-X-VERSION:3", "#EXT-X-TARGETDURATION:2", "#EXT-X-MEDIA-SEQUENCE:0", "#EXT-X-PLAYLIST-TYPE:VOD",
        ]
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
            for line in playlist.split(separator: "\n")
            where !line.hasPrefix("#EXTM3U") && !line.hasPrefix("#EXT-X-VERSION")
                && !line.hasPrefix("#EXT-X-TARGETDURATION") && !line.hasPrefix("#EXT-X-MEDIA-SEQUENCE")
                && !line.hasPrefix("#EXT-X-PLAYLIST-TYPE")
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
    package static func makeFMP4(in dir: URL, seconds: Int = 6) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try run(
            ffmpeg,
            base + video(seconds) + h264 + [
                "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4",
                "-hls_fmp4_init_filename", "init.mp4", "-hls_segment_filename", dir.path + "/seg%03d.m4s", dir.path + "/index.m3u8",
            ])
    }

    /// A live sliding window: `live.m3u8` lists the last 3 of 5 segments, media sequence 2, no EXT-X-ENDLIST
    /// (what a live origin serves at one moment).
    package static func makeLiveWindow(in dir: URL) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try run(
            ffmpeg,
            base + video(10) + h264 + [
                "-f", "hls", "-hls_time", "2", "-hls_list_size", "0", "-hls_segment_filename", dir.path + "/seg%03d.ts",
                dir.path + "/full.m3u8",
            ])
        let full = try String(contentsOf: dir.appendingPathComponent("full.m3u8"), encoding: .utf8)
        var entries: [(String, String)] = []
        var pending: String?
        for line in full.split(separator: "\n").map(String.init) {
            if line.hasPrefix("#EXTINF") {
                pending = line
            } else if let inf = pending, !line.hasPrefix("#") {
                entries.append((inf, line))
                pending = nil
            }
        }
        let window = entries.suffix(3)
        var text = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:\(entries.count - window.count)\n"
        for (inf, uri) in window { text += "\(inf)\n\(uri)\n" }
        try text.write(to: dir.appendingPathComponent("live.m3u8"), atomically: true, encoding: .utf8)
    }

    /// One TS file addressed with EXT-X-BYTERANGE (`index.m3u8`, `index.ts`).
    package static func makeByteRange(in dir: URL, seconds: Int = 6) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try run(
            ffmpeg,
            base + video(seconds) + h264 + [
                "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_flags", "single_file", dir.path + "/index.m3u8",
            ])
    }
}

extension FFmpeg {
    /// AES-128 TS in one file addressed by `EXT-X-BYTERANGE`s (`index.m3u8`, `index.ts`, key `k.key`): each
    /// range is a separately padded AES-128 segment.
    package static func makeAES128ByteRange(in dir: URL, seconds: Int = 6) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let keyFile = dir.appendingPathComponent("k.key")
        try Data((0..<16).map { _ in UInt8.random(in: 0...255) }).write(to: keyFile)
        let info = dir.appendingPathComponent("keyinfo.txt")
        try "k.key\n\(keyFile.path)\n".write(to: info, atomically: true, encoding: .utf8)
        try run(
            ffmpeg,
            base + video(seconds) + h264 + [
                "-f", "hls", "-hls_time", "2", "-hls_playlist_type", "vod", "-hls_flags", "single_file", "-hls_key_info_file", info.path,
                dir.path + "/index.m3u8",
            ])
        // ffmpeg leaves a scratch copy behind in this mode.
        try? FileManager.default.removeItem(at: dir.appendingPathComponent("index.ts.tmp"))
    }
}

/// A mutable box for handing a value out of a thread.
package final class NIOSafeBox<T>: @unchecked Sendable {
    package var value: T?
}

/// Streams generated once per test process, shared by the suites.
package enum Streams {
    package static let root: URL = {
        // One directory per test module: this file is compiled into several test targets (HLSAdminTests links it),
        // all in one test process, each with its own lock — a shared directory would let one module remove a
        // stream another is still making.
        let module = #fileID.split(separator: "/").first.map(String.init) ?? "tests"
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-streams-\(getpid())-\(module)")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }()

    private static let made = NIOSafeLock()

    /// Makes the stream `name` with `maker` unless it exists; returns its directory.
    package static func stream(_ name: String, _ maker: @escaping @Sendable (URL) throws -> Void) async throws -> URL {
        try await offThread { try streamBlocking(name, maker) }
    }

    private static func streamBlocking(_ name: String, _ maker: (URL) throws -> Void) throws -> URL {
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

package final class NIOSafeLock: @unchecked Sendable {
    private let lock = NSLock()
    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

/// Runs blocking work (a child process, a socket read) on its own thread so it never occupies one of the few
/// threads of Swift's cooperative pool: with two cores, two blocked tests would stall every other test.
package func offThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
