import Foundation

/// Runs the real `hlscache` binary built next to the test bundle.
package struct CLI {
    package static var binary: URL {
        let testBundle = URL(fileURLWithPath: CommandLine.arguments[0])
        var dir = testBundle.deletingLastPathComponent()
        // On Linux the test runner is `.build/<triple>/debug/hlscachePackageTests.xctest`.
        if !FileManager.default.fileExists(atPath: dir.appendingPathComponent("hlscache").path) {
            dir = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug")
        }
        return dir.appendingPathComponent("hlscache")
    }

    /// Runs the binary to its end. `environment` is added to this process's environment, or with `isolated` to
    /// PATH and HOME only (so no `HLSCACHE_*` variable of the test run leaks in). The wait happens on a thread of
    /// its own, never on Swift's cooperative pool (see ``onOwnThread(_:)``).
    package static func run(
        _ arguments: [String], environment: [String: String] = [:], isolated: Bool = false
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await onOwnThread { try runBlocking(arguments, environment: environment, isolated: isolated) }
    }

    /// ``run(_:environment:isolated:)`` for code that is already on a thread of its own.
    package static func runBlocking(
        _ arguments: [String], environment: [String: String] = [:], isolated: Bool = false
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = ChildProcess()
        process.executableURL = binary
        process.arguments = arguments
        let inherited = ProcessInfo.processInfo.environment
        if isolated {
            let base = ["PATH": inherited["PATH"] ?? "/usr/bin:/bin", "HOME": inherited["HOME"] ?? "/tmp"]
            process.environment = base.merging(environment) { $1 }
        } else if !environment.isEmpty {
            process.environment = inherited.merging(environment) { $1 }
        }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }
}
