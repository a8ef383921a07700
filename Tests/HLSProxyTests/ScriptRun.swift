import Foundation
import HLSTestSupport

/// Runs one of the repository's scripts (`scripts/…`) with the hlscache binary under test, and returns its exit
/// status and everything it printed (stdout and stderr, in order), for the tests that prove a script's scenario.
enum ScriptRun {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func run(_ script: String, _ arguments: [String] = []) async throws -> (status: Int32, log: String) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [repository.appendingPathComponent(script).path] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["HLSCACHE_BIN"] = CLI.binary.path
        process.environment = environment
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-script-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        await process.waitForExit()
        try handle.close()
        return (process.terminationStatus, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }
}
