import Foundation
import HLSTestSupport
import NIOConcurrencyHelpers
import Testing

@testable import HLSAdmin

/// The admin API reads and writes `items.sqlite` on threads of its own: another process holding that database's
/// write lock holds up the API's writes for their busy timeout, never the proxy's own blocking work on the shared
/// pool (cache writes, stored playlists, stored keys, `/readyz`).
@Suite struct AdminThreadsTests {
    @Test func aLockedItemsDatabaseHoldsUpTheAPIButNotTheProxy() async throws {
        // The creations wait for the lock longer than a loaded machine can take to get to `/readyz` (a busy timeout
        // running out first would answer them, with an error, before it).
        let h = try await AdminHarness(
            root: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"), itemsBusyTimeout: 120)
        defer { h.shutdownLater() }
        // Another connection (another process, as far as SQLite knows) takes the write lock and keeps it.
        let other = try await onOwnThread { try WriteLock(path: h.cacheDirectory.appendingPathComponent("items.sqlite").path) }
        let answered = NIOLockedValueBox(0)
        let writes = (0..<3).map { index in
            Task {
                defer { answered.withLockedValue { $0 += 1 } }
                return try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/w\(index).m3u8"))","id":"w\#(index)"}"#)
            }
        }
        try await Task.sleep(for: .milliseconds(500))  // the creations reach the lock and wait

        // /readyz checks the cache index on the proxy's pool: answered while every creation still waits.
        let ready = try await h.request(.GET, "\(h.base)/readyz")
        #expect(ready.status == 200)
        #expect(answered.withLockedValue { $0 } == 0, "the creations were answered first: /readyz waited behind them")

        await onOwnThread { other.release() }
        for write in writes { #expect(try await write.value.status == 201) }
        await h.shutdown()
    }
}
