import Foundation

/// A live HLS origin written by ffmpeg in real time (`-re`): `live.m3u8` lists the last `listSize` one-second
/// segments (older ones deleted, unless `keepSegments`: still served once out of the playlist), with program date-times; with `rotateKeysEvery`, AES-128 with a new key every N
/// segments (`-hls_flags periodic_rekey`, the key info file rewritten as segments appear). Serve `dir` with a
/// ``TestOrigin``. ``stop()`` ends it as an encoder does (SIGINT: ffmpeg writes `EXT-X-ENDLIST`).
package final class LiveStream: @unchecked Sendable {
    package let dir: URL
    private let process = ChildProcess()
    private let stopped = NIOSafeBox<Bool>()

    package init(in dir: URL, listSize: Int = 4, rotateKeysEvery: Int? = nil, keepSegments: Bool = false) throws {
        self.dir = dir
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var flags = (keepSegments ? "" : "delete_segments+") + "program_date_time+temp_file"
        var encryption: [String] = []
        if rotateKeysEvery != nil {
            try writeKeyInfo(0)
            flags += "+periodic_rekey"
            encryption = ["-hls_key_info_file", dir.appendingPathComponent("keyinfo.txt").path]
        }
        process.executableURL = URL(fileURLWithPath: FFmpeg.ffmpeg)
        process.arguments =
            [
                "-hide_banner", "-loglevel", "error", "-nostdin", "-re", "-f", "lavfi", "-i", "testsrc2=size=160x90:rate=25",
                "-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p",
                "-f", "hls", "-hls_time", "1", "-hls_list_size", String(listSize), "-hls_flags", flags,
            ] + encryption + ["-hls_segment_filename", dir.path + "/seg%05d.ts", dir.path + "/live.m3u8"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        if let every = rotateKeysEvery {
            // A new key once every `every` segments have appeared (ffmpeg reads the info file at each segment).
            Thread.detachNewThread { [self] in
                var key = 0
                while stopped.value != true {
                    let written = Self.segmentsWritten(in: dir)
                    if written / every > key {
                        key = written / every
                        try? writeKeyInfo(key)
                    }
                    usleep(100_000)
                }
            }
        }
    }

    /// The highest segment number on disk + 1 (segments are numbered from 0; older ones are deleted).
    private static func segmentsWritten(in dir: URL) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.compactMap { name -> Int? in
            guard name.hasPrefix("seg"), name.hasSuffix(".ts") else { return nil }
            return Int(name.dropFirst(3).dropLast(3))
        }.max().map { $0 + 1 } ?? 0
    }

    private func writeKeyInfo(_ index: Int) throws {
        let keyFile = dir.appendingPathComponent("key\(index).key")
        try Data((0..<16).map { _ in UInt8.random(in: 0...255) }).write(to: keyFile)
        let info = dir.appendingPathComponent("keyinfo.tmp")
        try "key\(index).key\n\(keyFile.path)\n".write(to: info, atomically: false, encoding: .utf8)
        _ = rename(info.path, dir.appendingPathComponent("keyinfo.txt").path)
    }

    /// Ends the stream as an encoder does: ffmpeg finishes its segment and writes `EXT-X-ENDLIST`.
    package func stop() async {
        stopped.value = true
        process.signal(SIGINT)
        await process.waitForExit()
    }

    /// Kills the encoder without an end (an origin that just stops updating).
    package func kill() async {
        stopped.value = true
        process.signal(SIGKILL)
        await process.waitForExit()
    }

    deinit {
        stopped.value = true
        if process.isRunning { process.signal(SIGKILL) }
    }
}
