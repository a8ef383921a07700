import Foundation
#if canImport(Glibc)
    import Glibc
#endif
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import HLSTestSupport
import Testing

@Suite struct CLITests {
    @Test func urlPrintsProxyURL() async throws {
        let result = try await CLI.run(["url", "https://cdn.example.com/vod/master.m3u8?t=1"])
        #expect(result.status == 0)
        #expect(result.stdout == "http://127.0.0.1:8080/https/cdn.example.com/vod/master.m3u8?t=1\n")
    }

    @Test func urlHonoursProxyBase() async throws {
        let result = try await CLI.run(["url", "--proxy", "http://10.0.0.2:9000", "http://127.0.0.1:28080/a.m3u8"])
        #expect(result.stdout == "http://10.0.0.2:9000/http/127.0.0.1:28080/a.m3u8\n")
    }

    /// Without `--proxy`, printed player URLs use the configured listen address — what a `serve` with the same
    /// configuration answers — with a wildcard address printed as loopback.
    @Test func playerURLsFollowTheConfiguredListenAddress() async throws {
        let target = "https://cdn.example.com/a.m3u8"
        #expect(
            try await CLI.run(["url", target], environment: ["HLSCACHE_LISTEN": "0.0.0.0:9090"]).stdout
                == "http://127.0.0.1:9090/https/cdn.example.com/a.m3u8\n")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-listen-url-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let config = dir.appendingPathComponent("hlscache.yaml")
        try "listen: \"[::]:9091\"\n".write(to: config, atomically: true, encoding: .utf8)
        #expect(try await CLI.run(["url", "--config", config.path, target]).stdout == "http://[::1]:9091/https/cdn.example.com/a.m3u8\n")
        #expect(
            try await CLI.run(["url", "--proxy", "http://10.0.0.2:9000", target], environment: ["HLSCACHE_LISTEN": "0.0.0.0:9090"]).stdout
                == "http://10.0.0.2:9000/https/cdn.example.com/a.m3u8\n")
        let fetch = try await CLI.run(
            ["fetch", "http://127.0.0.1:1/a.m3u8", "--detach", "--cache-dir", dir.appendingPathComponent("cache").path],
            environment: ["HLSCACHE_LISTEN": "127.0.0.1:9999"])
        #expect(fetch.status == 0)
        #expect(fetch.stdout.contains("play http://127.0.0.1:9999/http/127.0.0.1:1/a.m3u8"), "\(fetch.stdout)")
        let bad = try await CLI.run(["url", target], environment: ["HLSCACHE_LISTEN": "nowhere"])
        #expect(bad.status == 78)
        #expect(bad.stderr.contains("HLSCACHE_LISTEN"))
    }

    @Test func urlRejectsNonHTTP() async throws {
        let result = try await CLI.run(["url", "ftp://example.com/a.m3u8"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("unsupportedScheme"))
    }

    @Test func versionAndHelp() async throws {
        let version = try await CLI.run(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.split(separator: ".").count == 3)
        let help = try await CLI.run(["--help"])
        #expect(help.stdout.contains("url"))
    }
}

@Suite struct CLIDocsTests {
    /// Every command `hlscache --help` lists has a section in docs/cli.md.
    @Test func everyListedCommandIsDocumented() async throws {
        let help = try await CLI.run(["--help"]).stdout
        let docs = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/cli.md"),
            encoding: .utf8)
        guard let section = help.range(of: "SUBCOMMANDS:") else {
            Issue.record("no SUBCOMMANDS section in --help")
            return
        }
        let commands = help[section.upperBound...].split(separator: "\n").compactMap { line -> String? in
            let trimmed = line.drop { $0 == " " }
            // A command's line is indented by two spaces; a wrapped abstract's next line by many more.
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = trimmed.split(separator: " ").first, name != "See" else {
                return nil
            }
            return String(name)
        }
        #expect(!commands.isEmpty)
        for command in commands where command != "help" {
            #expect(docs.contains("## hlscache \(command)"), "docs/cli.md lacks a section for \(command)")
        }
    }
}

@Suite struct ServeCommandTests {
    /// Starts the real binary on an OS-chosen port, talks to it, and stops it with SIGTERM.
    @Test func servesHealthAndStopsCleanlyOnSIGTERM() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let process = ChildProcess()
        process.executableURL = CLI.binary
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--cache-dir", cache.path, "--log-level", "error"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        // The first line names the bound address: "hlscache X serving on http://127.0.0.1:PORT (cache ...)".
        let firstLine = await onOwnThread { readFirstLine(of: out) }
        let base = try #require(firstLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))
        #expect(firstLine.contains(cache.path))

        let (data, response) = try await URLSession.shared.data(from: URL(string: base + "/healthz")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: data, as: UTF8.self).contains("ok"))
        #expect(FileManager.default.fileExists(atPath: cache.appendingPathComponent("index.sqlite").path))

        process.terminate()  // SIGTERM
        try await waitUntil("serve to exit after SIGTERM", interval: .milliseconds(50)) { !process.isRunning }
        #expect(process.terminationStatus == 0)
        // The clean stop is recorded: no session file left, so the next start skips the full recovery pass.
        #expect((try? FileManager.default.contentsOfDirectory(atPath: cache.appendingPathComponent("sessions").path)) == [])
    }

    /// What startup recovery repaired is logged: a crashed writer's temp file and an object file no row names (left
    /// by a process killed mid-commit) are removed, and the notice says so.
    @Test func startupRecoveryIsLogged() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let hash = String(repeating: "ab", count: 32)
        let temp = cache.appendingPathComponent("tmp/\(hash).999999.1.tmp")
        let orphan = cache.appendingPathComponent("objects/ab/\(hash.dropFirst(2))")
        for file in [temp, orphan] {
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: file.path, contents: Data("left behind".utf8)))
        }
        let log = cache.appendingPathComponent("serve.log")
        #expect(FileManager.default.createFile(atPath: log.path, contents: nil))
        let process = ChildProcess()
        process.executableURL = CLI.binary
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--cache-dir", cache.path, "--log-level", "notice"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = try FileHandle(forWritingTo: log)
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let firstLine = await onOwnThread { readFirstLine(of: out) }
        #expect(firstLine.contains("serving on"))
        process.terminate()
        try await waitUntil("serve to exit after SIGTERM", interval: .milliseconds(50)) { !process.isRunning }
        let logged = try String(contentsOf: log, encoding: .utf8)
        #expect(
            logged.contains(
                "cache repaired (a process stopped uncleanly): removed 1 unfinished download from tmp/, removed 1 file no object names; 0 objects stored"
            ),
            "\(logged)")
        #expect(!FileManager.default.fileExists(atPath: temp.path) && !FileManager.default.fileExists(atPath: orphan.path))
    }

    /// A start that fails leaves the cache as cleanly closed as a stop: a port already taken (after the cache was
    /// opened), and a bad API token (checked before anything is opened).
    @Test func aRefusedStartLeavesNoSessionBehind() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let (taken, port) = try LoopbackSocket.listen()
        defer { close(taken) }

        let busy = try await CLI.run(["serve", "--listen", "127.0.0.1:\(port)", "--cache-dir", cache.path, "--log-level", "error"])
        #expect(busy.status == 71, "a taken port is not a bad option (64)")
        #expect(busy.stderr.hasPrefix("hlscache: cannot listen on 127.0.0.1:\(port)"), "\(busy.stderr)")
        #expect(!busy.stderr.contains("Usage"), "\(busy.stderr)")
        #expect(FileManager.default.fileExists(atPath: cache.appendingPathComponent("index.sqlite").path))  // it had opened the cache
        #expect((try? FileManager.default.contentsOfDirectory(atPath: cache.appendingPathComponent("sessions").path)) == [])

        let other = cache.appendingPathComponent("other")
        let token = try await CLI.run(["serve", "--listen", "127.0.0.1:0", "--cache-dir", other.path, "--api-token", "short"])
        #expect(token.status == 78, "a config error, not a usage error (64)")
        #expect(token.stderr.contains("api.token"))
        #expect(!FileManager.default.fileExists(atPath: other.path))
    }

    /// A malformed `HLSCACHE_MASTER_KEY` or a `master.key` others can read is a configuration error (one line, 78),
    /// never "corrupted" (6) or the usage text; the variable's value is not echoed.
    @Test func anUnusableMasterKeyIsAConfigurationError() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-mk-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let secretish = String(repeating: "ab", count: 31) + "c"  // 63 digits
        let serve = try await CLI.run(
            ["serve", "--listen", "127.0.0.1:0", "--cache-dir", cache.path, "--log-level", "error"],
            environment: ["HLSCACHE_MASTER_KEY": secretish])
        #expect(serve.status == 78, "\(serve.stderr)")
        #expect(serve.stderr == "hlscache: config error: the master key is unusable: HLSCACHE_MASTER_KEY must be 64 hexadecimal digits\n")
        #expect(!serve.stderr.contains(secretish) && !serve.stdout.contains(secretish))
        #expect((try? FileManager.default.contentsOfDirectory(atPath: cache.appendingPathComponent("sessions").path)) == [])

        // A first use writes master.key (0600); opened up to 0644, the next command refuses it and says how to fix it.
        let fine = try await CLI.run(["fetch", "http://127.0.0.1:1/a.m3u8", "--fail-fast", "--cache-dir", cache.path])
        #expect(fine.status == 3, "\(fine.stderr)")  // nothing listens on port 1
        #expect(fine.stderr.contains("the origin could not be reached: connection refused"), "\(fine.stderr)")
        let keyFile = cache.appendingPathComponent("master.key").path
        try #require(FileManager.default.fileExists(atPath: keyFile))
        #expect(chmod(keyFile, 0o644) == 0)
        for arguments in [["fetch", "http://127.0.0.1:1/a.m3u8"], ["serve", "--listen", "127.0.0.1:0"], ["resume", "nope"]] {
            let refused = try await CLI.run(arguments + ["--cache-dir", cache.path])
            #expect(refused.status == 78, "\(arguments): \(refused.stderr)")
            #expect(
                refused.stderr.hasPrefix(
                    "hlscache: config error: the master key is unusable: \(keyFile) is readable by other users (mode 644); run chmod 600 on it"
                ), "\(refused.stderr)")
            #expect(!refused.stderr.contains("Usage"))
        }
        // Write (or other) bits without read are refused too — whoever can replace the key chooses it — and the
        // message says what they allow (it said "readable" for 620).
        for (mode, allowed) in [(0o620, "writable"), (0o602, "writable"), (0o610, "executable"), (0o666, "readable and writable")] {
            #expect(chmod(keyFile, mode_t(mode)) == 0)
            let refused = try await CLI.run(["fetch", "http://127.0.0.1:1/a.m3u8", "--cache-dir", cache.path])
            #expect(refused.status == 78, "\(String(mode, radix: 8)): \(refused.stderr)")
            #expect(
                refused.stderr.hasPrefix(
                    "hlscache: config error: the master key is unusable: \(keyFile) is \(allowed) by other users (mode \(String(mode, radix: 8))); run chmod 600 on it"
                ),
                "\(refused.stderr)")
        }
    }

    @Test func badOptionsAreClearErrors() async throws {
        let listen = try await CLI.run(["serve", "--listen", "nonsense"])
        #expect(listen.status != 0)
        #expect(listen.stderr.contains("--listen"))
        let proxy = try await CLI.run(["serve", "--upstream-proxy", "nocolon"])
        #expect(proxy.status != 0)
        #expect(proxy.stderr.contains("--upstream-proxy"))
        let size = try await CLI.run(["serve", "--max-cache-size", "lots"])
        #expect(size.status != 0)
        #expect(size.stderr.contains("--max-cache-size"))
        let variants = try await CLI.run(["fetch", "http://127.0.0.1:1/a.m3u8", "--variants", "foo"])
        #expect(variants.status == 64)
        #expect(variants.stderr.contains("Error: --variants foo: expected all, best, worst"), "\(variants.stderr)")
    }
}

@Suite struct ItemCommandTests {
    /// The item commands on an empty cache: listing works, unknown ids are clear errors with their exit status.
    @Test func itemCommandsOnAnEmptyCache() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-items-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let ls = try await CLI.run(["ls", "--cache-dir", cache.path, "--json"])
        #expect(ls.status == 0)
        #expect(ls.stdout.isEmpty)
        for command in ["show", "pause", "resume", "rm", "lock", "unlock"] {
            let result = try await CLI.run([command, "nope", "--cache-dir", cache.path])
            #expect(result.status == 7, "\(command) of an unknown id")
            #expect(result.stderr.contains("unknownItem"))
        }
        let bad = try await CLI.run(["fetch", "http://127.0.0.1:1/a.m3u8", "--seconds", "40000", "--cache-dir", cache.path])
        #expect(bad.status != 0 && bad.stderr.contains("--seconds"))
        let state = try await CLI.run(["ls", "--state", "sleeping", "--cache-dir", cache.path])
        #expect(state.status != 0 && state.stderr.contains("--state"))
    }

    /// An existing id continues that item — for the same stream only: another URL is refused (exit 8), and other
    /// options are named as ignored rather than silently dropped.
    @Test func anExistingIdIsNotReusedForAnotherStream() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-sameid-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let first = try await CLI.run(["fetch", "http://127.0.0.1:1/a.m3u8", "--detach", "--id", "same", "--cache-dir", cache.path])
        #expect(first.status == 0)
        let other = try await CLI.run(["fetch", "http://127.0.0.1:1/b.m3u8", "--detach", "--id", "same", "--cache-dir", cache.path])
        #expect(other.status == 8)
        #expect(other.stderr.contains("already prewarms another stream") && other.stderr.contains("hlscache rm same"), "\(other.stderr)")
        #expect(!other.stdout.contains("b.m3u8"), "no play URL for a stream that is not the item's")
        let again = try await CLI.run([
            "fetch", "http://127.0.0.1:1/a.m3u8", "--detach", "--id", "same", "--seconds", "6", "--cache-dir", cache.path,
        ])
        #expect(again.status == 0)
        #expect(again.stdout.contains("note: item same exists: it is resumed with its own options (--seconds 0)"), "\(again.stdout)")
        let show = try await CLI.run(["show", "same", "--json", "--cache-dir", cache.path])
        #expect(show.stdout.contains("a.m3u8") && !show.stdout.contains("b.m3u8"))
    }

    /// `fetch --detach` records a queued item; a `serve` on the same cache picks it up (nothing listens on port 1:
    /// the item ends waiting for its origin, `idle` with `network` as its reason, which shows the scheduler ran it).
    @Test func detachedItemsArePickedUpByServe() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-detach-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let fetch = try await CLI.run(["fetch", "http://127.0.0.1:1/a.m3u8", "--detach", "--id", "later", "--cache-dir", cache.path])
        #expect(fetch.status == 0)
        #expect(fetch.stdout.contains("http://127.0.0.1:8080/http/127.0.0.1:1/a.m3u8"))
        #expect(try await CLI.run(["ls", "--state", "queued", "--cache-dir", cache.path]).stdout.contains("later"))

        let process = ChildProcess()
        process.executableURL = CLI.binary
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--cache-dir", cache.path, "--log-level", "warning"]
        let serveLog = cache.appendingPathComponent("serve.log")
        _ = FileManager.default.createFile(atPath: serveLog.path, contents: nil)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: serveLog)
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        // A bound on the wait, not a speed requirement: alone this takes about a second.
        let deadline = Date().addingTimeInterval(120)
        var state = ""
        var last = ""
        while Date() < deadline {
            let show = try await CLI.run(["show", "later", "--json", "--cache-dir", cache.path])
            last = "status \(show.status): \(show.stdout) \(show.stderr)"
            // Nothing listens on port 1: the origin is unavailable, so the item waits for it (idle with the reason).
            if show.stdout.contains("\"state\":\"idle\"") && show.stdout.contains("\"nextAttemptAt\"") {
                state = show.stdout
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        let log = (try? String(contentsOf: serveLog, encoding: .utf8)) ?? ""
        #expect(state.contains("\"error\":\"network\""), "serve ran the queued item; last show: \(last); serve log: \(log)")
        process.terminate()
        await process.waitForExit()
    }
}
