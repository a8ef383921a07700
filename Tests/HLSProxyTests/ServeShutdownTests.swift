import AsyncHTTPClient
import Foundation
import HLSTestSupport
import NIOCore
import NIOPosix
import Testing

/// SIGTERM to the real `hlscache serve`: a slow cache miss in flight finishes, new connections are refused, a
/// background download is left resumable, the process exits 0, and its JSON log lines parse.
@Suite(.serialized) struct ServeShutdownTests {
    static var binary: URL { CLI.binary }

    /// Runs a short-lived command of the binary off the cooperative pool.
    /// - Parameter stderr: return standard error instead of standard output.
    static func run(_ arguments: [String], stderr: Bool = false) async throws -> (status: Int32, stdout: String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        let process = ChildProcess()
                        process.executableURL = binary
                        process.arguments = arguments
                        let out = Pipe()
                        if stderr {
                            process.standardOutput = FileHandle.nullDevice
                            process.standardError = out
                        } else {
                            process.standardOutput = out
                            process.standardError = FileHandle.nullDevice
                        }
                        try process.run()
                        let data = out.fileHandleForReading.readDataToEndOfFile()
                        process.waitUntilExit()
                        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
                    })
            }
        }
    }

    @Test func badOperationsOptionsAreClearErrors() async throws {
        for (arguments, flag) in [(["--log-format", "xml"], "--log-format"), (["--shutdown-grace", "soon"], "--shutdown-grace")] {
            let result = try await Self.run(["serve", "--listen", "127.0.0.1:0"] + arguments, stderr: true)
            #expect(result.status != 0)
            #expect(result.stdout.contains(flag), "\(result.stdout)")
        }
    }

    static func state(of id: String, cache: URL) async throws -> String? {
        let show = try await run(["show", id, "--json", "--cache-dir", cache.path])
        let object = try? JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any]
        return object?["state"] as? String
    }

    /// Starts `serve` on an OS-chosen port; returns the process and its base URL (from the first stdout line,
    /// waited for on a thread of its own).
    static func serve(cache: URL, extra: [String], stderr: URL) async throws -> (ChildProcess, String) {
        try await onOwnThread { try serveBlocking(cache: cache, extra: extra, stderr: stderr) }
    }

    private static func serveBlocking(cache: URL, extra: [String], stderr: URL) throws -> (ChildProcess, String) {
        let process = ChildProcess()
        process.executableURL = binary
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--cache-dir", cache.path, "--free-disk-cushion", "0"] + extra
        let out = Pipe()
        process.standardOutput = out
        _ = FileManager.default.createFile(atPath: stderr.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: stderr)
        try process.run()
        let firstLine = readFirstLine(of: out)
        guard let base = firstLine.split(separator: " ").first(where: { $0.hasPrefix("http://") }) else {
            process.terminate()
            throw CancellationError()
        }
        return (process, String(base))
    }

    /// Whether a TCP connection to the port is refused (blocking; call off the pool).
    static func connectionRefused(port: Int) async -> Bool {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                defer { close(fd) }
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = in_port_t(UInt16(port).bigEndian)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                let result = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                continuation.resume(returning: result != 0 && errno == ECONNREFUSED)
            }
        }
    }

    @Test func sigtermDrainsTheSlowMissPausesDownloadsAndExitsZero() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-sigterm-origin-\(UUID().uuidString)")
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-sigterm-\(UUID().uuidString)")
        let logFile = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-sigterm-\(UUID().uuidString).log")
        defer {
            try? FileManager.default.removeItem(at: dir)
            try? FileManager.default.removeItem(at: cache)
            try? FileManager.default.removeItem(at: logFile)
        }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        // A big segment served slowly (about 4 s), and a 6-segment VOD stream for a background download.
        let big = (0..<160_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        try Data(big).write(to: dir.appendingPathComponent("big.ts"))
        var playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
        for index in 0..<6 {
            playlist += "#EXTINF:2.0,\nv\(index).ts\n"
            try Data((0..<60_000).map { UInt8(truncatingIfNeeded: $0 &+ index) }).write(to: dir.appendingPathComponent("v\(index).ts"))
        }
        playlist += "#EXT-X-ENDLIST\n"
        try Data(playlist.utf8).write(to: dir.appendingPathComponent("vod.m3u8"))
        let origin = TestOrigin(root: dir)
        try await origin.start()
        origin.setFault(.slow(chunk: 8192, delay: .milliseconds(200)), for: "/big.ts")
        // The segments after the first stall: however slow the machine, the download cannot finish before the signal.
        origin.setFault(.slow(chunk: 4096, delay: .milliseconds(500)), for: "/v0.ts")
        for index in 1..<6 { origin.setFault(.stallAfter(bytes: 4096), for: "/v\(index).ts") }

        let detach = try await Self.run(["fetch", origin.baseURL + "/vod.m3u8", "--detach", "--id", "slowitem", "--cache-dir", cache.path])
        #expect(detach.status == 0)

        // A grace far beyond the slow miss's 4 s, for a loaded machine: it costs nothing (the drain ends with the response).
        let (process, base) = try await Self.serve(
            cache: cache, extra: ["--log-format", "json", "--shutdown-grace", "300s"], stderr: logFile)
        defer { if process.isRunning { process.terminate() } }
        let port = try #require(URL(string: base)?.port)

        // The scheduler picks the item up.
        try await waitUntil("the item to be downloading", interval: .milliseconds(100)) {
            try await Self.state(of: "slowitem", cache: cache) == "downloading"
        }

        // A slow cache miss is streaming when the signal arrives.
        let client = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton))
        // Shut down however the test ends (a client left running traps in its deinit, taking the whole run down).
        defer { client.shutdown { _ in } }
        let response = try await client.execute(
            HTTPClientRequest(url: "\(base)/http/127.0.0.1:\(origin.port)/big.ts"), timeout: .seconds(120))
        #expect(response.status == .ok)
        kill(process.processIdentifier, SIGTERM)

        try await waitUntil("new connections to be refused after SIGTERM") { await Self.connectionRefused(port: port) }
        var body: [UInt8] = []
        for try await chunk in response.body { body.append(contentsOf: chunk.readableBytesView) }
        #expect(sameBytes(body, big), "the response in flight completed")
        try await client.shutdown()

        try await waitUntil("serve to exit", interval: .milliseconds(50)) { !process.isRunning }
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)

        // The download was interrupted cleanly: resumable, not stuck in `downloading`.
        #expect(try await Self.state(of: "slowitem", cache: cache) == "idle")
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.appendingPathComponent("tmp").path).isEmpty)

        // JSON logs: every line is one object; the slow miss has its access line.
        let lines = try String(contentsOf: logFile, encoding: .utf8).split(separator: "\n")
        #expect(!lines.isEmpty)
        var access: [[String: Any]] = []
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            #expect(object["timestamp"] is String && object["level"] is String && object["label"] is String && object["message"] is String)
            if object["label"] as? String == "hlscache.access" { access.append(object) }
        }
        let bigLine = access.compactMap { $0["metadata"] as? [String: String] }.first { $0["path"]?.hasSuffix("/big.ts") == true }
        #expect(bigLine?["status"] == "200")
        #expect(bigLine?["cache"] == "miss")
        #expect(bigLine?["bytes"] == String(big.count))
        #expect(bigLine?["complete"] == "true")

        // The next start resumes the item and completes it.
        for index in 0..<6 { origin.setFault(nil, for: "/v\(index).ts") }
        let (again, _) = try await Self.serve(cache: cache, extra: ["--log-level", "error"], stderr: logFile)
        defer { if again.isRunning { again.terminate() } }
        try await waitUntil("the resumed item to be cached", interval: .milliseconds(100)) {
            try await Self.state(of: "slowitem", cache: cache) == "cached"
        }
        kill(again.processIdentifier, SIGTERM)
        await again.waitForExit()
        #expect(again.terminationStatus == 0)
        await origin.stop()
    }
}
