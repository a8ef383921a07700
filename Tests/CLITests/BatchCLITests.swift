import Foundation
import HLSTestSupport
import Testing

/// `hlscache pause|resume|rm|lock|unlock --state S --tag T --all` (issue 43): the batch endpoint's per-item code from
/// the command line, listed only (a dry run) past 20 items without `--yes`. Items recorded with `fetch --from --detach`
/// in a real cache directory; no download runs (no `serve`).
@Suite struct BatchCLITests {
    @Test func selectedByTagStateOrAllWithADryRunPastTwentyItems() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-batch-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let cache = ["--cache-dir", dir.appendingPathComponent("cache").path]
        func record(_ count: Int, tag: String) async throws {
            let list = dir.appendingPathComponent("\(tag).txt")
            try (0..<count).map { "http://127.0.0.1:1/\(tag)/\($0).m3u8" }.joined(separator: "\n").write(
                to: list, atomically: true, encoding: .utf8)
            let run = try await CLI.run(["fetch", "--from", list.path, "--detach", "--tag", tag] + cache)
            #expect(run.status == 0, "\(run.stderr)")
        }
        try await record(22, tag: "big")
        try await record(3, tag: "small")
        func count(_ filters: [String]) async throws -> Int {
            try await CLI.run(["ls", "--json"] + filters + cache).stdout.split(separator: "\n").count
        }

        let small = try await CLI.run(["pause", "--tag", "small"] + cache)
        #expect(small.status == 0, "\(small.stderr)")
        #expect(small.stdout.split(separator: "\n").filter { $0.hasSuffix(": paused") }.count == 3, "\(small.stdout)")
        let dry = try await CLI.run(["pause", "--tag", "big"] + cache)
        #expect(dry.status == 0 && dry.stdout.hasPrefix("would pause 22 items (give --yes to act)"), "\(dry.stdout)")
        #expect(try await count(["--state", "paused"]) == 3, "the dry run changed nothing")
        #expect(try await CLI.run(["pause", "--tag", "big", "--yes"] + cache).status == 0)
        #expect(try await count(["--state", "paused"]) == 25)

        #expect(try await CLI.run(["lock", "--state", "paused", "--yes"] + cache).status == 0)
        #expect(try await count(["--locked"]) == 25)
        #expect(try await CLI.run(["unlock", "--all", "--yes"] + cache).status == 0)
        #expect(try await count(["--locked"]) == 0)

        let resumed = try await CLI.run(["resume", "--tag", "small", "--state", "paused"] + cache)
        #expect(resumed.status == 0 && resumed.stdout.split(separator: "\n").allSatisfy { $0.hasSuffix(": queued") }, "\(resumed.stdout)")
        #expect(try await count(["--state", "queued"]) == 3)

        let kept = try await CLI.run(["rm", "--tag", "small", "--keep-metadata"] + cache)
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(try await count(["--state", "deleted"]) == 3)
        // An action that does not apply to some items: done for the others, reported per item, exit 1.
        let mixed = try await CLI.run(["pause", "--all", "--yes"] + cache)
        #expect(mixed.status == 1, "\(mixed.stdout)")
        #expect(mixed.stdout.contains(": invalidState: "), "\(mixed.stdout)")
        let removed = try await CLI.run(["rm", "--all", "--yes"] + cache)
        #expect(removed.status == 0 && removed.stdout.split(separator: "\n").count == 25, "\(removed.stdout)")
        #expect(try await count([]) == 0)

        for bad in [["pause"], ["pause", "x", "--all"], ["lock", "--all", "--tag", "t"], ["unlock", "--state", "nope"]] {
            let refused = try await CLI.run(bad + cache)
            #expect(refused.status == 64, "\(bad): \(refused.stderr)")
        }
    }
}
