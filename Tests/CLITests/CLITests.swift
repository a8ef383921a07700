import Foundation
import Testing

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

    static func run(_ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
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

@Suite struct CLITests {
    @Test func urlPrintsProxyURL() throws {
        let result = try CLI.run(["url", "https://cdn.example.com/vod/master.m3u8?t=1"])
        #expect(result.status == 0)
        #expect(result.stdout == "http://127.0.0.1:8080/https/cdn.example.com/vod/master.m3u8?t=1\n")
    }

    @Test func urlHonoursProxyBase() throws {
        let result = try CLI.run(["url", "--proxy", "http://10.0.0.2:9000", "http://127.0.0.1:28080/a.m3u8"])
        #expect(result.stdout == "http://10.0.0.2:9000/http/127.0.0.1:28080/a.m3u8\n")
    }

    @Test func urlRejectsNonHTTP() throws {
        let result = try CLI.run(["url", "ftp://example.com/a.m3u8"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("unsupportedScheme"))
    }

    @Test func versionAndHelp() throws {
        let version = try CLI.run(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.split(separator: ".").count == 3)
        let help = try CLI.run(["--help"])
        #expect(help.stdout.contains("url"))
    }
}

@Suite struct CLIDocsTests {
    /// Every command `hlscache --help` lists has a section in docs/cli.md.
    @Test func everyListedCommandIsDocumented() throws {
        let help = try CLI.run(["--help"]).stdout
        let docs = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/cli.md"), encoding: .utf8)
        guard let section = help.range(of: "SUBCOMMANDS:") else {
            Issue.record("no SUBCOMMANDS section in --help")
            return
        }
        let commands = help[section.upperBound...].split(separator: "\n").compactMap { line -> String? in
            let trimmed = line.drop { $0 == " " }
            guard line.hasPrefix("  "), let name = trimmed.split(separator: " ").first, name != "See" else { return nil }
            return String(name)
        }
        #expect(!commands.isEmpty)
        for command in commands where command != "help" {
            #expect(docs.contains("## hlscache \(command)"), "docs/cli.md lacks a section for \(command)")
        }
    }
}
