import Foundation
import Testing

/// Runs `scripts/crash-cycles.sh 10` against the real binary: `serve` and `fetch` SIGKILLed at random moments,
/// the cache checked against its index and the origin after every recovery, and the interrupted item resumed
/// to completion (the long run, 50+ cycles, is recorded in docs/reliability.md).
@Suite(.serialized) struct CrashCyclesScriptTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test func tenCrashCyclesLeaveAConsistentCacheAndTheItemCompletes() async throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [Self.repository.appendingPathComponent("scripts/crash-cycles.sh").path, "10"]
        var environment = ProcessInfo.processInfo.environment
        environment["HLSCACHE_BIN"] = FetchKillResumeTests.binary.path
        process.environment = environment
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-crash-cycles-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        await process.waitForExit()
        try handle.close()
        let log = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 0, "crash-cycles.sh failed:\n\(log.suffix(3000))")
        #expect(log.contains("PASS: 10 cycles"), "\(log.suffix(3000))")
        #expect(log.contains(", 0 wrong;"))
    }
}
