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
        // Its output goes to files it opens itself (``ChildProcess/outputFiles``), read once it has exited.
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-\(UUID().uuidString)").path
        let (outPath, errPath) = (base + ".out", base + ".err")
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        process.outputFiles = (outPath, errPath)
        try process.run()
        process.waitUntilExit()
        let stdout = FileManager.default.contents(atPath: outPath) ?? Data()
        let stderr = FileManager.default.contents(atPath: errPath) ?? Data()
        return (process.terminationStatus, String(decoding: stdout, as: UTF8.self), String(decoding: stderr, as: UTF8.self))
    }

    /// `serve` printed no address to reach it on its first line (it failed to start; its line says why).
    package struct NoListenAddress: Error, CustomStringConvertible {
        package let line: String
        package var description: String { "serve printed no address: \(line)" }
    }

    /// Starts `hlscache serve` on a free port of 127.0.0.1 for `cache`, errors only in its log, with `arguments` after
    /// those and `environment` added to this process's; returns the process and the base URL its first line names.
    /// The caller stops it (``stop(_:)``).
    package static func startServe(
        cache: String, arguments: [String] = [], environment: [String: String] = [:]
    ) async throws -> (process: ChildProcess, base: String) {
        let process = ChildProcess()
        process.executableURL = binary
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--cache-dir", cache, "--log-level", "error"] + arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let firstLine = await onOwnThread { readFirstLine(of: out) }
        guard let base = firstLine.split(separator: " ").first(where: { $0.hasPrefix("http://") }).map(String.init) else {
            process.terminate()
            throw NoListenAddress(line: firstLine)
        }
        return (process, base)
    }

    /// Waits for `process` to end, 120 s at most (a bound, not a measurement); whether it did.
    package static func exited(_ process: ChildProcess) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(120)
        while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        return !process.isRunning
    }

    /// Sends `process` SIGTERM and waits for it to end (``exited(_:)``); whether it did.
    package static func stop(_ process: ChildProcess) async throws -> Bool {
        process.terminate()
        return try await exited(process)
    }
}
