import Foundation
import GRDB
import HLSTestSupport
import Testing

/// Several `hlscache` processes started at the same moment on a fresh cache directory: each creates and migrates
/// `index.sqlite`, `items.sqlite` and `keys.sqlite`. They used to race — both saw no migration applied, both ran
/// `v1`, and one exited 6 `corrupted` (`table "keys" already exists`, `duplicate column name: owner_token`) in
/// about half the runs. Migrations of one database are now serialized across processes (`SQLiteFiles.openMigrated`).
@Suite struct ConcurrentStartTests {
    /// Port 1 on loopback: nothing listens. `--detach` only records the item, but opens all three databases first.
    static let unreachable = "http://127.0.0.1:1/a.m3u8"

    /// Starts `count` `hlscache fetch --detach` processes on `directory` back to back (before any waits), then
    /// waits for each; returns their exit statuses and stderr.
    static func startTogether(_ count: Int, directory: URL) throws -> [(status: Int32, stderr: String)] {
        var started: [(ChildProcess, Pipe)] = []
        for n in 0..<count {
            let process = ChildProcess()
            process.executableURL = CLI.binary
            process.arguments = ["fetch", "\(unreachable)?n=\(n)", "--cache-dir", directory.path, "--id", "item\(n)", "--detach"]
            let environment = ProcessInfo.processInfo.environment
            process.environment = ["PATH": environment["PATH"] ?? "/usr/bin:/bin", "HOME": directory.path]
            let err = Pipe()
            process.standardOutput = FileHandle.nullDevice
            process.standardError = err
            try process.run()
            started.append((process, err))
        }
        return started.map { process, err in
            let stderr = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: stderr, as: UTF8.self))
        }
    }

    /// The applied migrations and the schema (every table, index and trigger with its SQL) of each database.
    static func schema(of directory: URL) throws -> [String: [String]] {
        var result: [String: [String]] = [:]
        for name in ["index.sqlite", "items.sqlite", "keys.sqlite"] {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: directory.appendingPathComponent(name).path, configuration: configuration)
            result[name] = try queue.read { db in
                try String.fetchAll(db, sql: "SELECT 'migration ' || identifier FROM grdb_migrations ORDER BY identifier")
                    + String.fetchAll(
                        db,
                        sql:
                            "SELECT type || ' ' || name || ': ' || IFNULL(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
                    )
            }
        }
        return result
    }

    @Test func processesStartingTogetherOnAFreshCacheAllSucceedWithTheWholeSchema() async throws {
        try await onOwnThread {
            let work = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-race-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: work) }
            // The schema one process alone makes.
            let reference = work.appendingPathComponent("reference")
            let alone = try Self.startTogether(1, directory: reference)
            #expect(alone[0].status == 0, "\(alone[0].stderr)")
            let expected = try Self.schema(of: reference)
            #expect(expected.values.allSatisfy { $0.contains { $0.hasPrefix("migration v1") } })

            for round in 0..<15 {
                let directory = work.appendingPathComponent("round\(round)")
                let results = try Self.startTogether(3, directory: directory)
                for (n, result) in results.enumerated() {
                    #expect(result.status == 0, "round \(round), process \(n): \(result.stderr)")
                }
                #expect(try Self.schema(of: directory) == expected, "round \(round)")
                let list = try CLI.runBlocking(
                    ["ls", "--json", "--cache-dir", directory.path], environment: ["HOME": directory.path], isolated: true)
                #expect(list.status == 0, "\(list.stderr)")
                #expect(list.stdout.split(separator: "\n").count == 3, "round \(round): \(list.stdout)")
            }
        }
    }
}
