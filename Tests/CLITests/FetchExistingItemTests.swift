import Foundation
import HLSTestSupport
import Testing

/// `hlscache fetch --id` with an id that exists or cannot be one (cli.md `fetch --id`): every option the existing
/// item keeps its own value of is named in the note; a deleted item (`rm --keep-metadata`) is queued again by
/// `fetch --id` and `resume`, as the SDKs' deleteFiles then download; `.` and `..` are no ids; `lock` refuses a
/// deleted item. Nothing here reaches an origin (`--detach`, port 1).
struct FetchExistingItemTests {
    private let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-existing-\(UUID().uuidString)")
    private let url = "http://127.0.0.1:1/a.m3u8"

    private func run(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await CLI.run(arguments + ["--cache-dir", cache.path])
    }

    @Test func theNoteNamesEveryIgnoredOption() async throws {
        defer { try? FileManager.default.removeItem(at: cache) }
        #expect(try await run(["fetch", url, "--detach", "--id", "same"]).status == 0)
        let again = try await run([
            "fetch", url, "--detach", "--id", "same", "--seconds", "4", "--lock", "--expires", "1m", "--header", "X-A: secret",
            "--variants", "best",
        ])
        #expect(again.status == 0)
        let note = try #require(again.stdout.split(separator: "\n").first { $0.hasPrefix("note: ") }, "\(again.stdout)")
        for option in ["--seconds 4", "--lock", "--expires 1m", "--header 'X-A: …'", "--variants best"] {
            #expect(note.contains(option), "the note names \(option): \(note)")
        }
        #expect(!note.contains("secret"), "header values are not printed")
        // Only the options given: the same options again name nothing.
        let plain = try await run(["fetch", url, "--detach", "--id", "same"])
        #expect(!plain.stdout.contains("note:"), "\(plain.stdout)")
    }

    private func state(_ id: String) async throws -> String? {
        let show = try await run(["show", id, "--json"])
        return (try? JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])?["state"] as? String
    }

    @Test func aDeletedItemIsQueuedAgainByFetchAndResume() async throws {
        defer { try? FileManager.default.removeItem(at: cache) }
        #expect(try await run(["fetch", url, "--detach", "--id", "gone"]).status == 0)
        #expect(try await run(["rm", "gone", "--keep-metadata"]).status == 0)
        #expect(try await state("gone") == "deleted")
        let fetch = try await run(["fetch", url, "--id", "gone", "--detach"])
        #expect(fetch.status == 0, "\(fetch.stderr)")
        #expect(fetch.stdout.contains("play"), "\(fetch.stdout)")
        #expect(try await state("gone") == "queued")
        #expect(try await run(["rm", "gone", "--keep-metadata"]).status == 0)
        #expect(try await run(["resume", "gone", "--detach"]).status == 0)
        #expect(try await state("gone") == "queued")
        #expect(try await run(["rm", "gone", "--keep-metadata"]).status == 0)
        let lock = try await run(["lock", "gone"])
        #expect(lock.status == 8 && lock.stderr.contains("deleted"), "lock a deleted item: \(lock.stderr)")
        // `rm` forgets it; then the id is free again.
        #expect(try await run(["rm", "gone"]).status == 0)
        #expect(try await run(["fetch", url, "--detach", "--id", "gone"]).status == 0)
    }

    @Test func dotAndDotDotAreNoIds() async throws {
        defer { try? FileManager.default.removeItem(at: cache) }
        for id in [".", ".."] {
            let fetch = try await run(["fetch", url, "--detach", "--id", id])
            #expect(fetch.status == 64, "--id \(id)")
            #expect(fetch.stderr.contains("not . or .."), "\(fetch.stderr)")
        }
        #expect(try await run(["fetch", url, "--detach", "--id", ".a."]).status == 0, "dots inside an id are fine")
    }
}
