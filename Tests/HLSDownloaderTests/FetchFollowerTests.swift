import Foundation
import HLSDownloader
import HLSTestSupport
import Testing

/// `hlscache fetch` processes around one item, as cli.md `fetch` and fetch.md (States, Resume) describe them: a
/// `fetch` of an item another process downloads follows it until it settles and takes the download over when that
/// process dies (SIGKILL, or a zombie its parent never reaps); SIGINT stops a follower with 130; an item removed
/// meanwhile ends a `fetch` with 0.
@Suite(.serialized) struct FetchFollowerTests {
    /// A `hlscache fetch` (or other command) child whose stdout goes to a file the test reads while it runs.
    private struct Command {
        let process: ChildProcess
        let output: URL

        var text: String { (try? String(contentsOf: output, encoding: .utf8)) ?? "" }

        /// Waits for the child's exit, at most `seconds` (a bound, not a measure: a debug binary under load can take
        /// over a minute to start); a child still running then is killed and reported.
        func exit(within seconds: Int) async -> Int32? {
            let deadline = ContinuousClock.now + .seconds(seconds)
            while process.isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
            guard !process.isRunning else {
                process.signal(SIGKILL)
                await process.waitForExit()
                return nil
            }
            return process.terminationStatus
        }
    }

    private let work = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-follow-\(UUID().uuidString)")
    private var cache: URL { work.appendingPathComponent("cache") }

    private func launch(_ arguments: [String]) throws -> Command {
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        let output = work.appendingPathComponent("out-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let process = ChildProcess()
        process.executableURL = CLI.binary
        process.arguments = arguments + ["--cache-dir", cache.path, "--free-disk-cushion", "0"]
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        return Command(process: process, output: output)
    }

    private func start() async throws -> (TestOrigin, String) {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        stallLastSegments(origin, true)
        return (origin, origin.baseURL + "/master.m3u8")
    }

    /// The last segment of each rendition stops after its first bytes while `on`: the owner is still downloading
    /// whenever the test acts, however fast or slow the machine (at 20 KB/s alone it could finish first, and a kill or
    /// a SIGINT then tested nothing).
    private func stallLastSegments(_ origin: TestOrigin, _ on: Bool) {
        for rendition in ["v0", "v1", "venglish"] { origin.setFault(on ? .stallAfter(bytes: 1000) : nil, for: "/\(rendition)/seg003.ts") }
    }

    /// Waits until `condition` holds, at most 180 s (a bound, not a measure: a debug `fetch` starting, planning and
    /// claiming its item took over 60 s at load 15); `context` says what the child printed, if it times out.
    private func waitUntil(_ what: String, context: () -> String = { "" }, _ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(180)
        while try !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out waiting until \(what)\(context())")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A slow `fetch` (20 KB/s: the stream takes half a minute) that has claimed item `id`.
    private func owner(_ url: String, id: String, items: ItemStore) async throws -> Command {
        let owner = try launch(["fetch", url, "--id", id, "--rate", "20KB"])
        let pid = owner.process.processIdentifier
        try await waitUntil(
            "\(id) is downloading by \(pid)",
            context: {
                "; the owner is \(owner.process.isRunning ? "running" : "gone"), the item is \(String(describing: try? items.item(id)?.state)), it printed: \(owner.text.suffix(1000))"
            }
        ) { try items.item(id).map { $0.state == .downloading && $0.ownerPID == pid } ?? false }
        return owner
    }

    /// A second `fetch` of item `id` (JSON lines), once it follows the owner: it printed a progress line.
    private func follower(_ url: String, id: String) async throws -> Command {
        let follower = try launch(["fetch", url, "--id", id, "--json"])
        try await waitUntil("the follower follows", context: { "; it printed: \(follower.text.suffix(1000))" }) {
            follower.text.contains("\"event\":\"progress\"")
        }
        return follower
    }

    @Test func aFollowerTakesOverWhenTheOwnerIsKilled() async throws {
        let (origin, url) = try await start()
        defer { try? FileManager.default.removeItem(at: work) }
        let items = try ItemStore(directory: cache.path)
        let owner = try await owner(url, id: "OW", items: items)
        let follower = try await follower(url, id: "OW")
        owner.process.signal(SIGKILL)
        await owner.process.waitForExit()
        stallLastSegments(origin, false)

        let status = await follower.exit(within: 180)
        #expect(status == 0, "the follower notices the dead owner and finishes the download (it waited forever)")
        let item = try #require(try items.item("OW"))
        #expect(item.state == .cached && item.ownerPID == nil)
        #expect(follower.text.contains("\"event\":\"done\"") && follower.text.contains("\"state\":\"cached\""))
        await origin.stop()
    }

    @Test func aZombieOwnerIsDeadAndItsItemResumes() async throws {
        let (origin, url) = try await start()
        defer { try? FileManager.default.removeItem(at: work) }
        let items = try ItemStore(directory: cache.path)
        let owner = try await owner(url, id: "ZO", items: items)
        // Killed and not reaped: the test process is its parent and does not wait for it yet, so it stays a zombie.
        let pid = owner.process.processIdentifier
        kill(pid, SIGKILL)
        try await waitUntil("\(pid) is a zombie") {
            let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
            return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
        }
        #expect(try items.item("ZO")?.state == .downloading)

        stallLastSegments(origin, false)
        let resume = try launch(["resume", "ZO"])
        #expect(await resume.exit(within: 180) == 0, "resume takes the zombie's item over (it was refused: exit 8)")
        #expect(try items.item("ZO")?.state == .cached)
        await owner.process.waitForExit()
        await origin.stop()
    }

    @Test func sigintStopsAFollowerWith130AndLeavesTheOwnerDownloading() async throws {
        let (origin, url) = try await start()
        defer { try? FileManager.default.removeItem(at: work) }
        let items = try ItemStore(directory: cache.path)
        let owner = try await owner(url, id: "SI", items: items)
        let follower = try await follower(url, id: "SI")
        follower.process.interrupt()
        #expect(await follower.exit(within: 180) == 130, "interrupted, as cli.md says for SIGINT (it exited 0)")
        let item = try #require(try items.item("SI"))
        #expect(item.state == .downloading && item.ownerPID == owner.process.processIdentifier, "the owner goes on")
        owner.process.signal(SIGKILL)
        await owner.process.waitForExit()
        await origin.stop()
    }

    @Test func aFetchWhoseItemIsRemovedMeanwhileExits0() async throws {
        let (origin, url) = try await start()
        defer { try? FileManager.default.removeItem(at: work) }
        let items = try ItemStore(directory: cache.path)
        let owner = try await owner(url, id: "RM", items: items)
        let follower = try await follower(url, id: "RM")
        let rm = try launch(["rm", "RM"])
        #expect(await rm.exit(within: 180) == 0)
        #expect(await owner.exit(within: 180) == 0, "the downloading fetch: removed meanwhile (it exited 7 unknownItem)")
        #expect(await follower.exit(within: 180) == 0, "the following fetch too")
        // `rm` moves the item to `deleted`, evicts, then forgets it: a fetch sees either the `deleted` row or no row.
        #expect(owner.text.contains("RM: removed") || owner.text.contains("RM: deleted"), "\(owner.text)")
        #expect(follower.text.contains("\"event\":\"done\"") && follower.text.contains("\"state\":\"deleted\""), "\(follower.text)")
        #expect(try items.item("RM") == nil)
        await origin.stop()
    }
}
