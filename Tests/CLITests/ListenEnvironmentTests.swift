import Foundation
import HLSTestSupport
import Testing

/// `serve` takes its listen address from `--listen`, else `$HLSCACHE_LISTEN` (what the Docker image sets to
/// 0.0.0.0:8080), else 127.0.0.1:8080. Runs the real binary with a controlled environment.
@Suite struct ListenEnvironmentTests {
    /// Starts `hlscache serve` with `environment` added, returns the first stdout line (the bound address), then
    /// stops it with SIGTERM and returns its exit status. Runs on its own thread (blocking pipe reads and waits).
    private static func serveFirstLine(_ arguments: [String], environment: [String: String]) async throws -> (line: String, status: Int32) {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        let process = ChildProcess()
                        process.executableURL = CLI.binary
                        process.arguments = ["serve"] + arguments + ["--log-level", "error"]
                        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
                        let out = Pipe()
                        process.standardOutput = out
                        process.standardError = FileHandle.nullDevice
                        try process.run()
                        var line = ""
                        while !line.contains("\n") {
                            let data = out.fileHandleForReading.availableData
                            if data.isEmpty { break }
                            line += String(decoding: data, as: UTF8.self)
                        }
                        if process.isRunning { process.terminate() }
                        process.waitUntilExit()
                        return (line, process.terminationStatus)
                    })
            }
        }
    }

    private static func temporaryCache() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-listen-\(UUID().uuidString)").path
    }

    @Test func environmentSetsTheListenAddress() async throws {
        let cache = Self.temporaryCache()
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let (line, status) = try await Self.serveFirstLine(["--cache-dir", cache], environment: ["HLSCACHE_LISTEN": "127.0.0.1:0"])
        // Port 0 asks the kernel for a free ephemeral port; the built-in default would have been 8080.
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("http://127.0.0.1:") }, "first line: \(line)")
        #expect(url != "http://127.0.0.1:8080")
        #expect(Int(url.split(separator: ":").last ?? "") ?? 0 > 0)
        _ = status  // the exit status after SIGTERM is ServeCommandTests' subject
    }

    @Test func flagWinsOverEnvironment() async throws {
        let cache = Self.temporaryCache()
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let (line, status) = try await Self.serveFirstLine(
            ["--listen", "127.0.0.1:0", "--cache-dir", cache], environment: ["HLSCACHE_LISTEN": "not-an-address"])
        #expect(line.contains("http://127.0.0.1:"), "first line: \(line)")
        _ = status
    }

    @Test func badEnvironmentValueIsAClearError() async throws {
        let cache = Self.temporaryCache()
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let result = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Int32, String), Error>) in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        let process = ChildProcess()
                        process.executableURL = CLI.binary
                        process.arguments = ["serve", "--cache-dir", cache]
                        process.environment = ProcessInfo.processInfo.environment.merging(["HLSCACHE_LISTEN": "not-an-address"]) { $1 }
                        let err = Pipe()
                        process.standardOutput = FileHandle.nullDevice
                        process.standardError = err
                        try process.run()
                        let stderr = err.fileHandleForReading.readDataToEndOfFile()
                        process.waitUntilExit()
                        return (process.terminationStatus, String(decoding: stderr, as: UTF8.self))
                    })
            }
        }
        #expect(result.0 != 0)
        #expect(result.1.contains("listen = \"not-an-address\" in env HLSCACHE_LISTEN"), "stderr: \(result.1)")
    }
}
