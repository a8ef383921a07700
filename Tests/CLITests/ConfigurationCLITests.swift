import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HLSTestSupport
import NIOCore
import Testing

/// The real binary with a config file, `HLSCACHE_*` variables and flags.
@Suite struct ConfigurationCLITests {
    /// Runs `hlscache` with exactly `environment` (plus PATH and HOME) and returns its status and output.
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (
        status: Int32, stdout: String, stderr: String
    ) {
        try await CLI.run(arguments, environment: environment, isolated: true)
    }

    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// The line for `key` in `--print-config` output.
    static func line(_ key: String, in output: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(key + " = ") }.map(String.init)
    }

    @Test func printConfigShowsThePrecedence() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("hlscache.yaml").path
        try Data(
            """
            listen: 127.0.0.1:9001
            cache:
              maxSize: 1GiB
              freeDiskCushion: 1MiB
            log:
              level: debug
            api:
              token: hunter2-hunter2-hunter2
            origins:
              cdn.example.com:
                headers:
                  X-Token: abc123
            """.utf8
        ).write(to: URL(fileURLWithPath: file))
        let result = try await Self.run(
            ["serve", "--config", file, "--listen", "127.0.0.1:9003", "--print-config"],
            environment: ["HLSCACHE_LISTEN": "127.0.0.1:9002", "HLSCACHE_CACHE_MAX_SIZE": "2GiB", "HLSCACHE_CACHE_DIR": directory.path])
        #expect(result.status == 0, "\(result.stderr)")
        let output = result.stdout
        #expect(Self.line("listen", in: output) == "listen = 127.0.0.1:9003  # --listen")
        #expect(Self.line("cache.maxSize", in: output) == "cache.maxSize = 2GiB  # env HLSCACHE_CACHE_MAX_SIZE")
        #expect(Self.line("cache.freeDiskCushion", in: output) == "cache.freeDiskCushion = 1MiB  # \(file)")
        #expect(Self.line("log.level", in: output) == "log.level = debug  # \(file)")
        #expect(Self.line("cache.dir", in: output) == "cache.dir = \(directory.path)  # env HLSCACHE_CACHE_DIR")
        #expect(Self.line("limits.idleTimeout", in: output) == "limits.idleTimeout = 1m  # default")
        #expect(Self.line("api.token", in: output) == "api.token = ********  # \(file)")
        #expect(output.contains("origins.cdn.example.com.headers.X-Token = ********  # \(file)"))
        #expect(!output.contains("hunter2") && !output.contains("abc123"))
        // --print-config opens nothing.
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("index.sqlite").path))

        // HLSCACHE_CONFIG names the file when --config is not given.
        let fromEnvironment = try await Self.run(["serve", "--print-config"], environment: ["HLSCACHE_CONFIG": file])
        #expect(Self.line("listen", in: fromEnvironment.stdout) == "listen = 127.0.0.1:9001  # \(file)")
    }

    /// Each kind of bad configuration: one line on stderr naming the key and the source, exit status 78.
    @Test func badConfigurationStopsWithOneLine() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        func write(_ name: String, _ yaml: String) throws -> String {
            let path = directory.appendingPathComponent(name).path
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
        let cases: [(arguments: [String], environment: [String: String], expected: String)] = [
            (["serve", "--config", try write("size.yaml", "cache:\n  maxSize: ten\n")], [:], "cache.maxSize = \"ten\" in "),
            (["serve", "--config", try write("duration.yaml", "shutdown:\n  grace: soon\n")], [:], "shutdown.grace = \"soon\" in "),
            (["serve", "--config", try write("unknown.yaml", "cache:\n  maxsize: 1GiB\n")], [:], "cache.maxsize in "),
            (["serve", "--config", try write("syntax.yaml", "cache:\n  maxSize: 1GiB\n    dir: x\n")], [:], "not valid YAML: line 3"),
            (["serve", "--config", directory.appendingPathComponent("missing.yaml").path], [:], "no such file"),
            (["serve", "--config", directory.path], [:], "it is a directory"),
            (
                ["serve", "--print-config"], ["HLSCACHE_ORIGIN_RETRIES": "many"],
                "origin.retries = \"many\" in env HLSCACHE_ORIGIN_RETRIES: not a whole number"
            ),
            (["serve", "--max-cache-size", "lots"], [:], "cache.maxSize = \"lots\" in --max-cache-size: not a size"),
            // A too-short admin token: masked, named by its real source, and checked by --print-config too.
            (
                ["serve", "--print-config"], ["HLSCACHE_API_TOKEN": "short"],
                "api.token = \"********\" in env HLSCACHE_API_TOKEN: expected at least 16"
            ),
            (["serve", "--print-config", "--api-token", "short"], [:], "api.token = \"********\" in --api-token: expected at least 16"),
            (["serve", "--config", try write("token.yaml", "api:\n  token: short\n")], [:], "api.token = \"********\" in "),
            // Every command that touches the cache reads the same file.
            (["ls", "--config", try write("ls.yaml", "cache:\n  maxSize: ten\n")], [:], "cache.maxSize = \"ten\""),
            (["fetch", "http://127.0.0.1:1/a.m3u8", "--config", try write("fetch.yaml", "bogus: 1\n")], [:], "bogus in "),
            (["keys", "ls", "--config", try write("keys.yaml", "keys:\n  ttl: forever\n")], [:], "keys.ttl = \"forever\""),
        ]
        for (arguments, environment, expected) in cases {
            let result = try await Self.run(arguments, environment: environment)
            #expect(result.status == 78, "\(arguments): status \(result.status), \(result.stderr)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(arguments): \(result.stderr) (stdout: \(result.stdout))")
            #expect(result.stderr.hasPrefix("hlscache: config error: "), "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains(expected), "\(arguments): \(result.stderr)")
            if let index = arguments.firstIndex(of: "--config"), !expected.contains("such file"), !expected.contains("directory") {
                #expect(result.stderr.contains(arguments[index + 1]), "\(arguments): the file is not named: \(result.stderr)")
            }
        }
    }

    /// `ls` with `--config` uses the file's `cache.dir`: the items database is created there.
    @Test func itemCommandsUseTheConfiguredCache() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cache = directory.appendingPathComponent("cache")
        let file = directory.appendingPathComponent("hlscache.yaml").path
        try Data("cache:\n  dir: \(cache.path)\n".utf8).write(to: URL(fileURLWithPath: file))
        let result = try await Self.run(["ls", "--config", file])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: cache.appendingPathComponent("items.sqlite").path))
    }

    /// `fetch` uses the origin settings of the config file: with `origin.allowedHosts` the origin host is refused
    /// by the destination policy before any connection; without the file it is tried (and refused by the OS).
    @Test func fetchUsesTheOriginSettingsOfTheConfigFile() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("hlscache.yaml").path
        try Data("origin:\n  allowedHosts: [only.example]\n".utf8).write(to: URL(fileURLWithPath: file))
        let url = "http://127.0.0.1:1/a.m3u8"
        let configured = try await Self.run(["fetch", url, "--config", file, "--cache-dir", directory.appendingPathComponent("a").path])
        #expect(configured.status != 0)
        #expect(configured.stderr.contains("not in the allowed hosts"), "\(configured.stderr)")
        // --fail-fast: an unreachable origin would otherwise be waited for.
        let plain = try await Self.run(["fetch", url, "--fail-fast", "--cache-dir", directory.appendingPathComponent("b").path])
        #expect(plain.status != 0)
        #expect(!plain.stderr.contains("not in the allowed hosts"), "\(plain.stderr)")
    }

    /// The names of `pid`'s threads (`/proc/PID/task/*/comm`).
    static func threadNames(of pid: Int32) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").compactMap { thread in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/comm", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// `http.eventLoops` is how many event loops serve: a server told 3 runs three loop threads of its own (NIO names
    /// them `NIO-ELT-…`) and none of NIO's singleton group; on `auto` it runs the singleton's, one per core NIO counts
    /// (`NIO-SGLTN-…`). All of a group's threads are started before the server listens, so before its first line.
    @Test func eventLoopsSetsHowManyLoopThreadsServe() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let three = try await CLI.startServe(
            cache: directory.appendingPathComponent("three").path, environment: ["HLSCACHE_HTTP_EVENT_LOOPS": "3"])
        defer { if three.process.isRunning { three.process.terminate() } }
        let threeNames = try Self.threadNames(of: three.process.processIdentifier)
        #expect(threeNames.filter { $0.hasPrefix("NIO-ELT-") }.count == 3, "\(threeNames)")
        #expect(!threeNames.contains { $0.hasPrefix("NIO-SGLTN-") }, "\(threeNames)")
        #expect(try await CLI.stop(three.process))

        let auto = try await CLI.startServe(cache: directory.appendingPathComponent("auto").path)
        defer { if auto.process.isRunning { auto.process.terminate() } }
        let autoNames = try Self.threadNames(of: auto.process.processIdentifier)
        #expect(autoNames.filter { $0.hasPrefix("NIO-SGLTN-") }.count == System.coreCount, "\(autoNames)")
        #expect(!autoNames.contains { $0.hasPrefix("NIO-ELT-") }, "\(autoNames)")
        #expect(try await CLI.stop(auto.process))
    }

    /// `listen` and `http.allowedWebOrigins` from the file take effect in the running server.
    @Test func fileSettingsTakeEffectInARunningServer() async throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("hlscache.yaml").path
        try Data(
            """
            listen: 127.0.0.1:0
            cache:
              dir: \(directory.appendingPathComponent("cache").path)
            http:
              allowedWebOrigins: [https://player.example]
            log:
              level: error
            """.utf8
        ).write(to: URL(fileURLWithPath: file))
        let process = ChildProcess()
        process.executableURL = CLI.binary
        process.arguments = ["serve", "--config", file]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        let firstLine = await onOwnThread { readFirstLine(of: out) }
        let base = try #require(
            firstLine.split(separator: " ").first { $0.hasPrefix("http://127.0.0.1:") }.map(String.init), "\(firstLine)")
        #expect(firstLine.contains(directory.appendingPathComponent("cache").path))

        var request = URLRequest(url: URL(string: base + "/healthz")!)
        request.setValue("https://player.example", forHTTPHeaderField: "Origin")
        let (_, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(http.value(forHTTPHeaderField: "Access-Control-Allow-Origin") == "https://player.example")

        process.terminate()
        await process.waitForExit()
        #expect(process.terminationStatus == 0)
    }
}
