import Foundation
import HLSDownloader
import HLSTestSupport
import Testing

/// The commands run with their standard output closed by the reader (`hlscache fetch URL | :`): every write fails
/// with `EPIPE`. Output stops quietly — no crash, no trace on standard error — and the command carries on: a
/// real fetch still downloads its item to the end instead of dying with it `queued` or `downloading`.
@Suite(.serialized) struct ClosedOutputTests {
    /// Runs the binary with a standard output pipe whose reading end is already closed, to its end.
    /// - Returns: how it ended and what it wrote on standard error.
    private func runWithClosedOutput(_ arguments: [String]) async throws -> (
        reason: ChildProcess.TerminationReason, status: Int32, stderr: String
    ) {
        let process = ChildProcess()
        process.executableURL = CLI.binary
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        try output.fileHandleForReading.close()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        await process.waitForExit()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationReason, process.terminationStatus, stderr)
    }

    @Test func aDryRunAndTheListingCommandsEndQuietly() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-epipe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let url = origin.baseURL + "/master.m3u8"
        for arguments in [
            ["fetch", url, "--dry-run", "--cache-dir", cache.path, "--free-disk-cushion", "0"],
            ["fetch", url, "--dry-run", "--json", "--cache-dir", cache.path, "--free-disk-cushion", "0"],
            ["url", url],
            ["ls", "--cache-dir", cache.path],
        ] {
            let result = try await runWithClosedOutput(arguments)
            #expect(result.reason == .exit && result.status == 0, "\(arguments): \(result.reason) \(result.status), \(result.stderr)")
            #expect(result.stderr.isEmpty, "\(arguments): \(result.stderr)")
        }
    }

    @Test func aFetchWhoseReaderIsGoneStillDownloadsItsItem() async throws {
        let dir = try await Streams.stream("ts-variants-audio-group", { try FFmpeg.makeTSVariants(in: $0) })
        let origin = TestOrigin(root: dir)
        try await origin.start()
        defer { Task { await origin.stop() } }
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-epipe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let url = origin.baseURL + "/master.m3u8"
        for json in [false, true] {
            let id = json ? "piped-json" : "piped"
            let result = try await runWithClosedOutput(
                ["fetch", url, "--id", id, "--cache-dir", cache.path, "--free-disk-cushion", "0"] + (json ? ["--json"] : []))
            #expect(result.reason == .exit && result.status == 0, "\(id): \(result.reason) \(result.status), \(result.stderr)")
            #expect(result.stderr.isEmpty, "\(id): \(result.stderr)")
            let item = try #require(try ItemStore(directory: cache.path).item(id))
            #expect(item.state == .cached, "\(id)")
            #expect(item.segmentsDone == item.segmentsTotal && item.segmentsTotal > 0, "\(id)")
        }
    }
}
