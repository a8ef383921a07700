import Foundation
import GRDB
import HLSTestSupport
import Testing

@testable import HLSDownloader

/// The items change feed and the narrow queries that replaced reading every item once a second.
@Suite struct ItemChangeFeedTests {
    private func makeStore() throws -> (ItemStore, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-feed-\(UUID().uuidString)")
        return (try ItemStore(directory: dir.path), dir)
    }

    private func ids(_ changes: ItemChangeFeed.Changes) -> [String] { changes.changed.map(\.id) }

    /// Every kind of write — insert, state change, progress, lock, resources done, purge — from this store or from
    /// a second connection (another process) reaches the feed exactly: what changed, nothing else.
    @Test func everyWriteShowsUpAndNothingElse() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        for id in ["a", "b", "c"] { try store.insert(DownloadItem(id: id, url: "https://x/\(id).m3u8", precacheSeconds: 10)) }
        let feed = ItemChangeFeed(items: store)
        let first = try feed.next()
        #expect(first.isFirst && Set(ids(first)) == ["a", "b", "c"] && first.removed.isEmpty)
        #expect(try feed.next().changed.isEmpty, "nothing changed")

        try store.apply(.start, to: "a")
        #expect(ids(try feed.next()) == ["a"])
        try store.update("b") { $0.locked = true }
        #expect(ids(try feed.next()) == ["b"])
        try store.setResources("a", [ItemResource(key: "k1", url: "https://x/1.ts", kind: "segment", size: nil)])
        _ = try store.markDone("a", key: "k1", size: 10) { _ in 10 }
        let progress = try feed.next()
        #expect(ids(progress) == ["a"] && progress.changed.first?.bytesDone == 10)

        // Another process: its own connection to the same file.
        let other = try ItemStore(directory: dir.path)
        try other.insert(DownloadItem(id: "d", url: "https://x/d.m3u8", precacheSeconds: 10))
        try other.purge("c")
        let mixed = try feed.next()
        #expect(ids(mixed) == ["d"] && mixed.removed == ["c"] && !mixed.isFirst)
        // A removal and an insertion in one interval, the count unchanged.
        try other.purge("b")
        try other.insert(DownloadItem(id: "e", url: "https://x/e.m3u8", precacheSeconds: 10))
        let swapped = try feed.next()
        #expect(ids(swapped) == ["e"] && swapped.removed == ["b"])
        #expect(try feed.next().changed.isEmpty && (try feed.next().removed.isEmpty))

        // Created and removed between two polls: unseen by the feed, so not reported — unless the caller knew of
        // it from elsewhere (the admin API hears of items from the downloader's events before any poll).
        try other.insert(DownloadItem(id: "brief", url: "https://x/brief.m3u8", precacheSeconds: 10))
        try other.purge("brief")
        #expect(try feed.next(alsoKnown: ["brief", "a"]).removed == ["brief"])
        try other.insert(DownloadItem(id: "brief2", url: "https://x/brief.m3u8", precacheSeconds: 10))
        try other.purge("brief2")
        #expect(try feed.next().removed.isEmpty)
    }

    /// A file from before the feed (schema v4) gets the column and triggers; its rows count as seen on the first poll.
    @Test func anItemsFileFromBeforeTheFeedIsMigrated() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-feed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ItemStore(directory: dir.path)
            try store.insert(DownloadItem(id: "old", url: "https://x/o.m3u8", precacheSeconds: 10))
        }
        let queue = try DatabaseQueue(path: dir.appendingPathComponent("items.sqlite").path)
        try queue.write { db in
            try db.execute(
                sql: """
                    DROP TRIGGER items_change_insert; DROP TRIGGER items_change_update; DROP TABLE item_changes;
                    DROP INDEX items_change_seq; DROP INDEX items_expiry; ALTER TABLE items DROP COLUMN change_seq;
                    DELETE FROM grdb_migrations WHERE identifier = 'v5-change-feed';
                    """)
        }
        try queue.close()
        let store = try ItemStore(directory: dir.path)
        let feed = ItemChangeFeed(items: store)
        #expect(ids(try feed.next()) == ["old"])
        try store.apply(.start, to: "old")
        #expect(ids(try feed.next()) == ["old"])
    }

    /// The scheduler's and expiry's queries read only the rows they need, through an index.
    @Test func runnableAndExpiringReadOnlyWhatTheyNeed() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        let now = Date()
        for index in 0..<20 {
            var item = DownloadItem(id: "i\(index)", url: "https://x/\(index).m3u8", precacheSeconds: 10, now: now + Double(index))
            if index % 5 == 0 { item.expiresAt = now - 1 }
            try store.insert(item)
            if index % 2 == 1 { try store.apply(.start, to: item.id) }
        }
        try store.apply(.finish(partial: false), to: "i1")
        #expect(try store.runnable(limit: 3).map(\.id) == ["i0", "i2", "i4"])
        #expect(try store.runnable(limit: 3, excluding: ["i2"]).map(\.id) == ["i0", "i4", "i6"])
        #expect(try store.runnable(limit: 0).isEmpty)
        #expect(Set(try store.expiring(at: now).map(\.id)) == ["i0", "i5", "i10", "i15"])
        try store.apply(.expire, to: "i5")
        #expect(Set(try store.expiring(at: now).map(\.id)) == ["i0", "i10", "i15"])
        let counts = try store.countsByState()
        #expect(
            counts["downloading"] == 8 && counts["queued"] == 10 && counts["cached"] == 1 && counts["expired"] == 1 && counts["paused"] == 0
        )

        let queue = try DatabaseQueue(path: dir.appendingPathComponent("items.sqlite").path)
        defer { try? queue.close() }
        try queue.read { db in
            for sql in [
                "SELECT * FROM items WHERE state IN ('queued', 'idle') ORDER BY created_at, id LIMIT 3",
                "SELECT * FROM items WHERE expires_at IS NOT NULL AND expires_at <= 1 AND state NOT IN ('expired', 'deleted') ORDER BY expires_at",
                "SELECT * FROM items WHERE change_seq > 5 ORDER BY change_seq",
            ] {
                let plan = try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String }.joined(separator: "; ")
                #expect(plan.contains("USING INDEX") || plan.contains("USING COVERING INDEX"), "\(sql): \(plan)")
                #expect(!plan.contains("SCAN items"), "\(sql): \(plan)")
            }
        }
    }
}
