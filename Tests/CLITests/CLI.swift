import Foundation

/// Runs the real `hlscache` binary built next to the test bundle.
struct CLI {
    static var binary: URL {
        let testBundle = URL(fileURLWithPath: CommandLine.arguments[0])
        var dir = testBundle.deletingLastPathComponent()
        // On Linux the test runner is `.build/<triple>/debug/hlscachePackageTests.xctest`.
        if !FileManager.default.fileExists(atPath: dir.appendingPathComponent("hlscache").path) {
            dir = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug")
        }
        return dir.appendingPathComponent("hlscache")
    }

    /// Runs the binary to its end; `environment` is added to this process's environment.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
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
