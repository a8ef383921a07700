import Foundation
import Testing

/// scripts/fleet-check.sh: three `serve` processes behind HAProxy (consistent URI hashing, health checks on /readyz),
/// ffmpeg playing an AES-128 stream through the balancer, one origin fetch and one node per object, a node killed
/// during playback (docs/scale-out.md).
@Suite(.serialized) struct FleetScriptTests {
    static let haproxy = ["/usr/sbin/haproxy", "/usr/bin/haproxy"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(.enabled(if: haproxy != nil, "haproxy is not installed (apt-get install haproxy, or make test-deps)"))
    func aFleetBehindHAProxyPlaysKeepsOneCopyPerObjectAndSurvivesANodeKilled() async throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [CrashCyclesScriptTests.repository.appendingPathComponent("scripts/fleet-check.sh").path]
        var environment = ProcessInfo.processInfo.environment
        environment["HLSCACHE_BIN"] = FetchKillResumeTests.binary.path
        process.environment = environment
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fleet-check-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        await process.waitForExit()
        try handle.close()
        let log = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 0, "fleet-check.sh failed:\n\(log.suffix(3000))")
        #expect(log.contains("PASS: fleet of 3"), "\(log.suffix(3000))")
    }
}
