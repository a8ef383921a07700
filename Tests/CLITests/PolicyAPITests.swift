import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HLSTestSupport
import Testing

/// `GET`/`PATCH /api/v1/policies` on the real binary: a change is validated like the config file, applied, announced
/// on `/events`, and kept in the cache directory across a restart (docs/api.md#policies).
@Suite struct PolicyAPITests {
    private static func startServe(cache: URL, rate: String) async throws -> (ChildProcess, String) {
        try await CLI.startServe(cache: cache.path, environment: ["HLSCACHE_DOWNLOADS_RATE_LIMIT": rate])
    }

    private static func stop(_ process: ChildProcess) async throws {
        #expect(try await CLI.stop(process))
    }

    private static func request(_ base: String, method: String = "GET", body: String? = nil) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: base + "/api/v1/policies")!)
        request.httpMethod = method
        if let body {
            request.httpBody = Data(body.utf8)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, object)
    }

    /// Checks responses and events against docs/openapi.yaml with Tests/HLSAdminTests/openapi_validate.py.
    private static func validate(_ records: [[String: Any]]) async throws -> (Int32, String) {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("..").standardized
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("policy-records-\(UUID().uuidString).json")
        try JSONSerialization.data(withJSONObject: records).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
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
        let data = await onOwnThread { out.fileHandleForReading.readDataToEndOfFile() }
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    private static func policies(_ object: [String: Any]) -> [String: String] {
        object["policies"] as? [String: String] ?? [:]
    }

    @Test func patchIsValidatedAppliedAnnouncedAndKeptAcrossARestart() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-policy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        var (process, base) = try await Self.startServe(cache: cache, rate: "1MiB")
        defer { if process.isRunning { process.terminate() } }

        let (status, first) = try await Self.request(base)
        #expect(status == 200)
        #expect(Self.policies(first)["downloads.rateLimit"] == "1MiB")
        #expect(Self.policies(first)["downloads.window"] == "~")
        #expect((first["rateLimitBytesPerSecond"] as? NSNumber)?.intValue == 1 << 20)
        #expect((first["overrides"] as? [String: String]) == [:])

        // A bad value is refused naming the key, and changes nothing.
        let (badStatus, bad) = try await Self.request(base, method: "PATCH", body: #"{"downloads.rateLimit":"fast"}"#)
        #expect(badStatus == 400)
        let message = (bad["error"] as? [String: Any])?["message"] as? String ?? String(describing: bad)
        #expect(message.contains("downloads.rateLimit"))
        let (unknownStatus, _) = try await Self.request(base, method: "PATCH", body: #"{"cache.maxSize":"1GiB"}"#)
        #expect(unknownStatus == 400)
        #expect(Self.policies(try await Self.request(base).1)["downloads.rateLimit"] == "1MiB")

        // A subscriber of /events sees the change: curl holds the stream (bounded by its --max-time).
        let curl = ChildProcess()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-sN", "--max-time", "120", base + "/api/v1/events?type=policy"]
        let events = Pipe()
        curl.standardOutput = events
        try curl.run()
        defer { if curl.isRunning { curl.terminate() } }
        let hello = await onOwnThread { readFirstLine(of: events) }
        #expect(hello.contains("retry:"))

        let (okStatus, changed) = try await Self.request(
            base, method: "PATCH", body: #"{"downloads.rateLimit":"256KiB","downloads.window":"22:00-06:00"}"#)
        #expect(okStatus == 200)
        #expect(Self.policies(changed)["downloads.rateLimit"] == "256KiB")
        #expect(Self.policies(changed)["downloads.window"] == "22:00-06:00")
        #expect((changed["overrides"] as? [String: String])?["downloads.rateLimit"] == "256KiB")
        // The downloader runs with the new cap (read from it).
        #expect((changed["rateLimitBytesPerSecond"] as? NSNumber)?.intValue == 256 << 10)
        let announced = await onOwnThread { () -> String in
            var text = ""
            let handle = events.fileHandleForReading
            while !text.contains("256KiB") {
                let data = handle.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            return text
        }
        #expect(announced.contains("event: policy"))
        #expect(announced.contains("\"downloads.rateLimit\":\"256KiB\""))
        let data = announced.split(separator: "\n").first { $0.hasPrefix("data: ") }.map { $0.dropFirst("data: ".count) } ?? ""
        let event = (try? JSONSerialization.jsonObject(with: Data(data.utf8))) ?? NSNull()
        let (valid, output) = try await Self.validate([
            ["method": "get", "path": "/policies", "status": 200, "body": first],
            ["method": "patch", "path": "/policies", "status": 400, "body": bad],
            ["method": "patch", "path": "/policies", "status": 200, "body": changed],
            ["schema": "PolicyEvent", "body": event],
        ])
        #expect(valid == 0, "\(output)")
        curl.terminate()

        // The stored change wins over the environment's rate after a restart on the same cache directory, until it is reset.
        try await Self.stop(process)
        (process, base) = try await Self.startServe(cache: cache, rate: "1MiB")
        let restarted = try await Self.request(base).1
        #expect(Self.policies(restarted)["downloads.rateLimit"] == "256KiB")
        #expect((restarted["rateLimitBytesPerSecond"] as? NSNumber)?.intValue == 256 << 10)
        let (resetStatus, reset) = try await Self.request(base, method: "PATCH", body: #"{"downloads.rateLimit":null}"#)
        #expect(resetStatus == 200)
        #expect(Self.policies(reset)["downloads.rateLimit"] == "1MiB")
        #expect((reset["rateLimitBytesPerSecond"] as? NSNumber)?.intValue == 1 << 20)
        #expect(Self.policies(reset)["downloads.window"] == "22:00-06:00")
        try await Self.stop(process)
    }

    /// `hlscache policy set` stores the change and signals the running server, which applies and announces it;
    /// a bad value is refused naming the key; `policy show` marks what is stored.
    @Test func policySetReachesTheRunningServer() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-policy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let (process, base) = try await Self.startServe(cache: cache, rate: "1MiB")
        defer { if process.isRunning { process.terminate() } }
        let curl = ChildProcess()
        curl.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        curl.arguments = ["-sN", "--max-time", "120", base + "/api/v1/events?type=policy"]
        let events = Pipe()
        curl.standardOutput = events
        try curl.run()
        defer { if curl.isRunning { curl.terminate() } }
        #expect(await onOwnThread { readFirstLine(of: events) }.contains("retry:"))

        let bad = try await CLI.run(["policy", "set", "--cache-dir", cache.path, "downloads.dailyLimit=lots"])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("downloads.dailyLimit"))
        let set = try await CLI.run(["policy", "set", "--cache-dir", cache.path, "downloads.dailyLimit=5GiB"])
        #expect(set.status == 0, "\(set.stderr)")
        let announced = await onOwnThread { () -> String in
            var text = ""
            let handle = events.fileHandleForReading
            while !text.contains("5GiB") {
                let data = handle.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            return text
        }
        #expect(announced.contains("event: policy"))
        #expect(Self.policies(try await Self.request(base).1)["downloads.dailyLimit"] == "5GiB")
        let show = try await CLI.run(["policy", "show", "--cache-dir", cache.path])
        #expect(show.stdout.contains("downloads.dailyLimit = 5GiB (stored)"))
        curl.terminate()
        try await Self.stop(process)
    }
}
