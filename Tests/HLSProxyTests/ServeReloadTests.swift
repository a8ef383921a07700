import AsyncHTTPClient
import Foundation
import HLSTestSupport
import NIOCore
import NIOPosix
import Testing

/// `SIGHUP` to the real `hlscache serve` (issue 45): a changed file is applied live (status and behaviour), a bad
/// file changes nothing and is logged once with its key, and a download streaming to a client meanwhile completes
/// byte for byte.
@Suite(.serialized) struct ServeReloadTests {
    /// `GET /api/v1/status` of the server at `base`.
    static func status(_ base: String, client: HTTPClient) async throws -> [String: Any] {
        let response = try await client.execute(HTTPClientRequest(url: base + "/api/v1/status"), timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 1 << 20)
        return try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
    }

    /// The `configuration` object of the status.
    static func configuration(_ base: String, client: HTTPClient) async throws -> [String: Any] {
        try #require(try await status(base, client: client)["configuration"] as? [String: Any])
    }

    /// The JSON log lines written so far.
    static func logLines(_ file: URL) throws -> [[String: Any]] {
        try String(contentsOf: file, encoding: .utf8).split(separator: "\n").compactMap {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Asks the origin, through the proxy, for a path it redirects: the origin client logs the redirect at debug.
    static func redirectedRequest(_ base: String, origin: TestOrigin, path: String, client: HTTPClient) async throws {
        origin.setFault(.redirect(to: "/target.ts"), for: path)
        let response = try await client.execute(
            HTTPClientRequest(url: "\(base)/http/127.0.0.1:\(origin.port)\(path)"), timeout: .seconds(60))
        #expect(response.status == .ok)
        _ = try await response.body.collect(upTo: 1 << 20)
    }

    /// Validates `/status` bodies against docs/openapi.yaml with the admin tests' validator.
    static func validateStatuses(_ bodies: [[String: Any]]) async throws {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        let records = bodies.map { ["method": "get", "path": "/status", "status": 200, "body": $0] as [String: Any] }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("reload-status-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: records).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await onOwnThread { () throws -> (Int32, String) in
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "python3", tests.appendingPathComponent("HLSAdminTests/openapi_validate.py").path,
                tests.appendingPathComponent("../docs/openapi.yaml").standardized.path, file.path,
            ]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        #expect(result.0 == 0, "\(result.1)")
    }

    static func debugLines(_ file: URL, containing text: String) throws -> Int {
        try logLines(file).filter { $0["level"] as? String == "debug" && ($0["message"] as? String)?.contains(text) == true }.count
    }

    /// An origin silence longer than any reload takes on a loaded machine.
    static let patient = "origin:\n  readTimeout: 10m\n"

    @Test func sighupAppliesTheNewFileRefusesABadOneAndTheDownloadCompletes() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-reload-\(UUID().uuidString)")
        let cache = directory.appendingPathComponent("cache")
        let logFile = directory.appendingPathComponent("serve.log")
        let configFile = directory.appendingPathComponent("hlscache.yaml")
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(repeating: 7, count: 1000).write(to: directory.appendingPathComponent("target.ts"))
        // The download is held mid-body through both reloads: on a loaded machine they may take minutes, so neither the
        // origin's silence nor the client's pause may end it (the same values in every version of the file).
        try Data("log:\n  level: info\ndownloads:\n  rateLimit: 1MiB\n\(Self.patient)limits:\n  sendTimeout: 10m\n".utf8).write(
            to: configFile)

        let origin = TestOrigin(root: directory)
        try await origin.start()
        // The slow download: held by the origin after 256 KiB until the reloads are done.
        let length: Int64 = 1_500_000
        origin.setFault(.pattern(length: length, holdAt: 256 << 10), for: "/slow.ts")

        let (process, base) = try await ServeShutdownTests.serve(
            cache: cache, extra: ["--config", configFile.path, "--log-format", "json"], stderr: logFile)
        defer { if process.isRunning { process.terminate() } }
        let client = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton))
        // Shut down however the test ends (a client left running traps in its deinit, taking the whole run down).
        defer { client.shutdown { _ in } }

        let started = try await Self.status(base, client: client)
        #expect((started["downloads"] as? [String: Any])?["rateLimit"] as? Int == 1 << 20)
        try await Self.redirectedRequest(base, origin: origin, path: "/before.ts", client: client)
        #expect(try Self.debugLines(logFile, containing: "origin redirect") == 0, "info: no debug lines before the reload")

        // A client is streaming the slow segment, its origin transfer held mid-body.
        let response = try await client.execute(
            HTTPClientRequest(url: "\(base)/http/127.0.0.1:\(origin.port)/slow.ts"), timeout: .seconds(300))
        #expect(response.status == .ok)
        var body = response.body.makeAsyncIterator()
        var received: [UInt8] = []
        while received.count < 64 << 10, let chunk = try await body.next() { received += chunk.readableBytesView }
        #expect(received.count >= 64 << 10)

        // 1. Another log level and another rate, and a restart-only change: `hlscache reload` sends SIGHUP.
        try Data(
            "log:\n  level: debug\ndownloads:\n  rateLimit: 2MiB\n\(Self.patient)limits:\n  sendTimeout: 10m\n  idleTimeout: 2m\n".utf8
        ).write(
            to: configFile)
        let reload = try await CLI.run(["reload", "--cache-dir", cache.path])
        #expect(reload.status == 0, "\(reload.stderr)")
        #expect(reload.stdout.contains("pid \(process.processIdentifier)"), "\(reload.stdout)")
        var configuration = try await eventually("the reload to be applied", interval: .milliseconds(50)) {
            let answered = try await Self.configuration(base, client: client)
            return answered["reloads"] as? Int == 1 ? answered : nil
        }
        #expect(configuration["file"] as? String == configFile.path)
        #expect(configuration["applied"] as? [String] == ["log.level", "downloads.rateLimit"])
        #expect(configuration["needsRestart"] as? [String] == ["limits.idleTimeout"])
        let reloaded = try await Self.status(base, client: client)
        #expect((reloaded["downloads"] as? [String: Any])?["rateLimit"] as? Int == 2 << 20)
        try await Self.validateStatuses([reloaded])
        // Behaviour: debug lines now.
        try await Self.redirectedRequest(base, origin: origin, path: "/after.ts", client: client)
        #expect(try Self.debugLines(logFile, containing: "origin redirect") >= 1, "debug after the reload")
        let reloadedLines = try Self.logLines(logFile).filter { ($0["message"] as? String)?.hasPrefix("reloaded ") == true }
        #expect(reloadedLines.count == 1)
        #expect((reloadedLines.first?["message"] as? String)?.contains("needs a restart: limits.idleTimeout") == true)

        // 2. A bad key (and another level, which must not be applied): refused whole, one line naming the key.
        try Data("log:\n  level: warning\ndownloads:\n  rateLimt: 3MiB\n\(Self.patient)limits:\n  sendTimeout: 10m\n".utf8).write(
            to: configFile)
        kill(process.processIdentifier, SIGHUP)
        configuration = try await eventually("the reload to be refused", interval: .milliseconds(50)) {
            let answered = try await Self.configuration(base, client: client)
            return answered["lastError"] != nil ? answered : nil
        }
        let lastError = try #require(configuration["lastError"] as? String)
        #expect(lastError.contains("downloads.rateLimt") && lastError.contains("unknown key"), "\(lastError)")
        #expect(configuration["reloads"] as? Int == 1)
        let refusals = try Self.logLines(logFile).filter { ($0["message"] as? String)?.contains("reload refused") == true }
        #expect(refusals.count == 1)
        #expect(refusals.first?["level"] as? String == "error")
        #expect((refusals.first?["message"] as? String)?.contains("downloads.rateLimt") == true)
        #expect((try await Self.status(base, client: client)["downloads"] as? [String: Any])?["rateLimit"] as? Int == 2 << 20)
        let debugBefore = try Self.debugLines(logFile, containing: "origin redirect")
        try await Self.redirectedRequest(base, origin: origin, path: "/refused.ts", client: client)
        #expect(try Self.debugLines(logFile, containing: "origin redirect") > debugBefore, "still debug: the bad file changed nothing")
        try await Self.validateStatuses([started, try await Self.status(base, client: client)])

        // The download goes on and completes byte for byte.
        origin.releasePattern("/slow.ts")
        while let chunk = try await body.next() { received += chunk.readableBytesView }
        #expect(received.count == Int(length))
        #expect(sameBytes(received, TestPattern.bytes(at: 0, count: Int(length)).readableBytesView))

        kill(process.processIdentifier, SIGTERM)
        await process.waitForExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        // The server removed its pid file; `hlscache reload` now says there is none.
        #expect(!FileManager.default.fileExists(atPath: cache.appendingPathComponent("serve.pid").path))
        let none = try await CLI.run(["reload", "--cache-dir", cache.path])
        #expect(none.status == 69 && none.stderr.contains("no running server"), "\(none.stderr)")
        await origin.stop()
    }
}
