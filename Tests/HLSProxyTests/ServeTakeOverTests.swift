import Foundation
import HLSTestSupport
import Testing

/// An upgrade without dropping players (issue 45): a second `hlscache serve --take-over` on the same cache directory
/// and address binds beside the running one (SO_REUSEPORT), which stops accepting, finishes its responses and exits,
/// while ffmpeg plays a stream through them in real time: no error, every frame as the origin's.
@Suite(.serialized) struct ServeTakeOverTests {
    /// Starts `serve` with `arguments`; returns the process and the first line of its standard output (its banner).
    static func serve(_ arguments: [String], stderr: URL) async throws -> (ChildProcess, String) {
        try await onOwnThread {
            let process = ChildProcess()
            process.executableURL = CLI.binary
            process.arguments = ["serve"] + arguments
            // The held segment waits for the new server to start, which takes long on a loaded machine: the old one's
            // wait for the origin's answer must not run out first.
            process.environment = ProcessInfo.processInfo.environment.merging(["HLSCACHE_ORIGIN_READ_TIMEOUT": "10m"]) { $1 }
            let out = Pipe()
            process.standardOutput = out
            _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: stderr)
            try process.run()
            return (process, readFirstLine(of: out))
        }
    }

    /// A 10-second stream in 1-second segments (`index.m3u8`, `seg000.ts`…`seg009.ts`).
    static func makeStream(in dir: URL) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try FFmpeg.run(
            FFmpeg.ffmpeg,
            [
                "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
                "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25:duration=10",
                "-f", "lavfi", "-i", "sine=frequency=440:duration=10",
                "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p",
                "-c:a", "aac", "-b:a", "64k", "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod",
                "-hls_segment_filename", dir.path + "/seg%03d.ts", dir.path + "/index.m3u8",
            ])
    }

    /// Paths the access log in `file` answered with 200 or 206.
    static func servedPaths(_ file: URL) throws -> [String] {
        try String(contentsOf: file, encoding: .utf8).split(separator: "\n").compactMap { line in
            guard line.contains("hlscache.access"), line.contains("status=200") || line.contains("status=206"),
                let path = line.split(separator: " ").first(where: { $0.hasPrefix("path=") })
            else { return nil }
            return String(path.dropFirst("path=".count))
        }
    }

    @Test func aTakeOverWhilePlayingDropsNoFrame() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-takeover-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let media = directory.appendingPathComponent("origin")
        try await offThread { try Self.makeStream(in: media) }
        let cache = directory.appendingPathComponent("cache")
        let oldLog = directory.appendingPathComponent("old.log")
        let newLog = directory.appendingPathComponent("new.log")

        let origin = TestOrigin(root: media)
        try await origin.start()
        let expected = try await FFmpeg.frameMD5(origin.baseURL + "/index.m3u8")
        #expect(expected.count > 200)
        // The fifth segment waits at the origin until the new server is up: the upgrade happens mid-stream, whatever
        // the speed of the machine.
        origin.setFault(.held, for: "/seg004.ts")
        let asked = origin.hits("/seg004.ts")

        let common = ["--cache-dir", cache.path, "--free-disk-cushion", "0", "--shutdown-grace", "300s"]
        let (old, oldBanner) = try await Self.serve(["--listen", "127.0.0.1:0"] + common, stderr: oldLog)
        defer { if old.isRunning { old.terminate() } }
        let base = try #require(oldBanner.split(separator: " ").first(where: { $0.hasPrefix("http://") }).map(String.init))
        let port = try #require(URL(string: base)?.port)

        // The player: ffmpeg reading at the stream's own pace.
        let url = "\(base)/http/127.0.0.1:\(origin.port)/index.m3u8"
        let player = Task {
            try await offThread {
                try FFmpeg.run(
                    FFmpeg.ffmpeg,
                    ["-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-i", url, "-map", "0", "-f", "framemd5", "-"],
                    timeout: 600)
            }
        }

        try await waitUntil("playback to reach the fifth segment") { origin.hits("/seg004.ts") > asked }

        // The new binary, same cache directory and address.
        let (new, newBanner) = try await Self.serve(["--listen", "127.0.0.1:\(port)", "--take-over"] + common, stderr: newLog)
        defer { if new.isRunning { new.terminate() } }
        #expect(newBanner.contains("serving on http://127.0.0.1:\(port)"), "\(newBanner)")
        origin.releasePattern("/seg004.ts")

        // The old one drains and exits by itself.
        try await waitUntil("the old server to drain and exit", timeout: .seconds(300), interval: .milliseconds(50)) { !old.isRunning }
        #expect(old.terminationReason == .exit && old.terminationStatus == 0)

        let (stdout, stderr) = try await player.value
        #expect(stderr.isEmpty, "the player saw no error: \(stderr)")
        let frames = String(decoding: stdout, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
        #expect(frames == expected, "every frame, in order: \(frames.count) of \(expected.count)")

        // Both served: the old one the start of the stream, the new one its end.
        let oldServed = try Self.servedPaths(oldLog)
        let newServed = try Self.servedPaths(newLog)
        #expect(oldServed.contains { $0.hasSuffix("/seg000.ts") }, "\(oldServed)")
        #expect(newServed.contains { $0.hasSuffix("/seg009.ts") }, "\(newServed)")
        let newLines = try String(contentsOf: newLog, encoding: .utf8)
        #expect(newLines.contains("took over 127.0.0.1:\(port) from pid \(old.processIdentifier)"))
        // The pid file names the new server.
        let pid = try String(contentsOf: cache.appendingPathComponent("serve.pid"), encoding: .utf8)
        #expect(pid.trimmingCharacters(in: .whitespacesAndNewlines) == String(new.processIdentifier))

        kill(new.processIdentifier, SIGTERM)
        await new.waitForExit()
        #expect(new.terminationStatus == 0)
        await origin.stop()
    }
}
