import Foundation
import GRDB
@testable import HLSDownloader
import HLSKeys
import HLSTestSupport
import Testing

@Suite struct ItemStoreTests {
    private func makeStore() throws -> (ItemStore, URL) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-items-\(UUID().uuidString)")
        return (try ItemStore(directory: dir.path), dir)
    }

    @Test func insertReadAndListByState() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        var item = DownloadItem(
            id: "a", url: "https://x/m.m3u8", precacheSeconds: 30, expiresAt: Date(timeIntervalSince1970: 2e9),
            headers: [HeaderField(name: "Authorization", value: "Bearer t")])
        item.selection = try RenditionSelection(variants: "best", audio: "en", subtitles: "none", iFrames: false)
        try store.insert(item)
        #expect(throws: DownloadError.invalidState) { try store.insert(item) }
        let read = try #require(try store.item("a"))
        #expect(read.selection == item.selection)
        #expect(read.headers == item.headers)
        #expect(read.expiresAt == item.expiresAt)
        #expect(read.state == .queued)
        #expect(try store.items(state: .queued).map(\.id) == ["a"])
        #expect(try store.items(state: .cached).isEmpty)
    }

    @Test func transitionsArePersistedAndValidated() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        try store.insert(DownloadItem(id: "b", url: "https://x/m.m3u8"))
        let claimed = try #require(try store.claim("b"))
        #expect(claimed.state == .downloading && claimed.ownerPID == getpid())
        #expect(try store.claim("b") == nil, "a live owner keeps it")
        let (failed, action) = try store.apply(.fail(code: "http"), to: "b")
        #expect(failed.state == .failed && failed.errorCode == "http" && action == .stopDownload)
        #expect(throws: DownloadError.invalidState) { try store.apply(.pause, to: "b") }
        #expect(throws: DownloadError.unknownItem) { try store.apply(.pause, to: "zz") }
    }

    /// An item interrupted by an unavailable origin waits for its next attempt: the scheduler's query leaves it out
    /// until then; a claim keeps the count of interruptions (the next wait is longer), a finish or resume clears it,
    /// and the run's start and completion times are kept.
    @Test func anIdleItemWaitsForItsNextAttempt() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        try store.insert(DownloadItem(id: "w", url: "https://x/m.m3u8"))
        let claimed = try #require(try store.claim("w"))
        let started = try #require(claimed.startedAt)
        let now = Date()
        let next = now.addingTimeInterval(60)
        try store.apply(.interrupt, to: "w") { item in
            item.errorCode = "network"
            item.errorMessage = "connection refused"
            item.interruptedAt = now
            item.nextAttemptAt = next
            item.interruptions = 1
        }
        let idle = try #require(try store.item("w"))
        #expect(idle.state == .idle && idle.errorCode == "network" && idle.errorMessage == "connection refused")
        #expect(idle.nextAttemptAt.map { abs($0.timeIntervalSince(next)) < 0.001 } == true)
        #expect(try store.runnable(limit: 10, now: now).isEmpty, "not before its next attempt")
        #expect(try store.runnable(limit: 10, now: next.addingTimeInterval(1)).map(\.id) == ["w"])

        let again = try #require(try store.claim("w"))
        #expect(again.interruptions == 1 && again.interruptedAt != nil && again.nextAttemptAt == nil && again.errorCode == nil)
        #expect(again.startedAt.map { abs($0.timeIntervalSince(started)) < 0.001 } == true, "the first start is kept")
        let (done, _) = try store.apply(.finish(partial: false), to: "w")
        #expect(done.state == .cached && done.completedAt != nil && done.interruptions == 0 && done.interruptedAt == nil)
        let (queued, _) = try store.apply(.resume, to: "w")
        #expect(queued.completedAt == nil, "queued again: not complete any more")
    }

    /// Evicted objects stop counting in every live item listing them: a cached item becomes partiallyCached while it
    /// has segments left, then evicted; an item being downloaded only has its counters corrected; markStored counts
    /// what is found again.
    @Test func evictedResourcesStopCountingAndTheItemSaysSo() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        let resources = [
            ItemResource(key: "p", url: "https://x/m.m3u8", kind: "playlist", size: 100),
            ItemResource(key: "s0", url: "https://x/s0.ts", kind: "segment", size: 1000),
            ItemResource(key: "s1", url: "https://x/s1.ts", kind: "segment", size: 1000),
        ]
        for id in ["c", "d"] {
            try store.insert(DownloadItem(id: id, url: "https://x/m.m3u8"))
            _ = try store.claim(id)
            try store.setResources(id, resources)
            try store.markDone(id, resources: resources.map { ($0.key, $0.size!) }, estimatedTotal: { _ in 2100 })
        }
        try store.apply(.finish(partial: false), to: "c")

        let first = try store.forgetStored(["s0", "unknown"])
        #expect(first.map(\.item.id) == ["c", "d"])
        let c = try #require(try store.item("c"))
        #expect(c.state == .partiallyCached && c.bytesDone == 1100 && c.segmentsDone == 1 && c.missingResources == 1)
        let d = try #require(try store.item("d"))
        #expect(d.state == .downloading && d.bytesDone == 1100, "a running item keeps its state")
        #expect(try store.forgetStored(["s0"]).isEmpty, "already not counted")

        try store.forgetStored(["s1"], only: "c")
        let gone = try #require(try store.item("c"))
        #expect(gone.state == .evicted && gone.segmentsDone == 0 && gone.missingResources == 2)
        #expect(try store.item("d")?.segmentsDone == 1, "only the item named")

        let found = try #require(try store.markStored("c", [(key: "s0", size: 1000), (key: "s1", size: 1000)]))
        #expect(found.found == 2 && found.item.missingResources == 0 && found.item.bytesDone == 2100)
        #expect(found.item.state == .evicted, "only a run (resume) makes it cached again")
        let (queued, _) = try store.apply(.resume, to: "c")
        #expect(queued.state == .queued)
    }

    @Test func downloadsOfDeadProcessesBecomeIdle() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        try store.insert(DownloadItem(id: "c", url: "https://x/m.m3u8"))
        _ = try store.claim("c")
        // A pid that cannot be alive.
        try store.update("c") { $0.ownerPID = Int32.max - 1 }
        #expect(try store.recoverInterrupted() == ["c"])
        #expect(try store.item("c")?.state == .idle)
    }

    /// PIDs are reused (and `serve` is PID 1 in every container start): an item claimed by an earlier process
    /// with the same PID is recovered, because the owner's start time differs; a live owner keeps its item.
    @Test func aReusedPIDIsNotTakenForTheOwner() async throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        try store.insert(DownloadItem(id: "reused", url: "https://x/m.m3u8"))
        let claimed = try #require(try store.claim("reused"))
        let token = try #require(claimed.ownerToken, "this process has a /proc identity")
        #expect(try store.recoverInterrupted().isEmpty, "the owner (this process) is alive")
        // The same PID, but an earlier process run (another start time).
        try store.update("reused") { $0.ownerToken = String(token.split(separator: ":")[0]) + ":1" }
        #expect(try store.recoverInterrupted() == ["reused"])
        #expect(try store.item("reused")?.state == .idle)

        // Another live process owns an item: kept while it runs, recovered once it has exited.
        let sleeper = ChildProcess()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        let pid = sleeper.processIdentifier
        let other = try #require(ProcessIdentity.token(of: pid))
        try store.insert(DownloadItem(id: "other", url: "https://x/m.m3u8"))
        _ = try store.claim("other")
        try store.update("other") {
            $0.ownerPID = pid
            $0.ownerToken = other
        }
        #expect(try store.recoverInterrupted().isEmpty)
        #expect(try store.claim("other") == nil, "a live owner keeps it")
        // SIGKILL: a SIGTERM can be ignored when the test runner's disposition is inherited (seen: a 30 s wait).
        kill(pid, SIGKILL)
        sleeper.waitUntilExit()
        #expect(try store.recoverInterrupted() == ["other"])
    }

    /// With a master key, item headers (cookies, tokens) are sealed in items.sqlite; another master key reads none;
    /// rows written in the clear before still read.
    @Test func headersAreSealedAtRestUnderTheMasterKey() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-items-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let plain = try ItemStore(directory: dir.path)
        try plain.insert(DownloadItem(id: "old", url: "https://x/m.m3u8", headers: [HeaderField(name: "X-Old", value: "legacy-value")]))
        let key = try MasterKey(bytes: Array(repeating: 1, count: 32))
        let store = try ItemStore(directory: dir.path, masterKey: key)
        let headers = [
            HeaderField(name: "Cookie", value: "session=sealed-secret"), HeaderField(name: "Authorization", value: "Bearer t0k3n"),
        ]
        try store.insert(DownloadItem(id: "new", url: "https://x/m.m3u8", headers: headers))
        #expect(try store.item("new")?.headers == headers)
        #expect(try store.item("old")?.headers == [HeaderField(name: "X-Old", value: "legacy-value")])
        for name in try FileManager.default.contentsOfDirectory(atPath: dir.path) {
            let bytes = try Data(contentsOf: dir.appendingPathComponent(name))
            #expect(bytes.range(of: Data("sealed-secret".utf8)) == nil, "\(name) holds a header value in the clear")
            #expect(bytes.range(of: Data("t0k3n".utf8)) == nil)
        }
        let other = try ItemStore(directory: dir.path, masterKey: try MasterKey(bytes: Array(repeating: 2, count: 32)))
        #expect(try other.item("new")?.headers == [])
        #expect(try ItemStore(directory: dir.path).item("new")?.headers == [])
    }

    @Test func resourcesTrackProgressAndSharing() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        try store.insert(DownloadItem(id: "d", url: "https://x/m.m3u8"))
        try store.insert(DownloadItem(id: "e", url: "https://x/m.m3u8"))
        try store.setResources(
            "d", [ItemResource(key: "k1", url: "u1", kind: "segment"), ItemResource(key: "k2", url: "u2", kind: "segment")])
        try store.setResources("e", [ItemResource(key: "k2", url: "u2", kind: "segment")])
        let item = try #require(try store.markDone("d", key: "k1", size: 100, estimatedTotal: { _ in 250 }))
        #expect(item.bytesDone == 100 && item.bytesTotal == 250 && item.segmentsDone == 1 && item.segmentsTotal == 2)
        let stored = try #require(try store.item("d"))
        #expect(stored.bytesDone == 100 && stored.bytesTotal == 250 && stored.segmentsDone == 1 && stored.segmentsTotal == 2)
        #expect(try store.markDone("gone", key: "k1", size: 1, estimatedTotal: { _ in 1 }) == nil)
        #expect(try store.isShared("k2", except: "d"))
        #expect(!(try store.isShared("k1", except: "d")))
        #expect(!(try store.isShared("k2", except: "d", lockedOnly: true)))
        try store.purge("e")
        #expect(!(try store.isShared("k2", except: "d")))
    }

    /// The SQL sums behind progress, and the estimate made from them: stored sizes, known byte-range lengths, and
    /// the average stored segment for segments of unknown size.
    @Test func resourceTotalsAndTheEstimateFromThem() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        try store.insert(DownloadItem(id: "d", url: "https://x/m.m3u8"))
        try store.setResources(
            "d",
            [
                ItemResource(key: "p", url: "p", kind: "playlist"), ItemResource(key: "s1", url: "s1", kind: "segment"),
                ItemResource(key: "s2", url: "s2", kind: "segment"), ItemResource(key: "s3", url: "s3", kind: "segment", size: 50),
                ItemResource(key: "s4", url: "s4", kind: "segment"), ItemResource(key: "s5", url: "s5", kind: "segment"),
                ItemResource(key: "k", url: "k", kind: "key"),
            ])
        let estimator = Downloader.estimator(estimate: 1000, segments: 5)
        // Nothing stored yet: the BANDWIDTH estimate's share (200 per segment) for the four unknown segments.
        let first = try #require(try store.markDone("d", key: "p", size: 10, estimatedTotal: estimator))
        #expect(first == ItemProgressCounts(bytesDone: 10, bytesTotal: 10 + 50 + 4 * 200, segmentsDone: 0, segmentsTotal: 5))
        try store.markDone("d", key: "s1", size: 100, estimatedTotal: estimator)
        let counts = try #require(try store.markDone("d", key: "s2", size: 500, estimatedTotal: estimator))
        let totals = try store.read { db in try ItemStore.resourceTotals(db, id: "d") }
        #expect(
            totals
                == ResourceTotals(
                    bytesDone: 610, segmentsDone: 2, segmentsTotal: 5, doneSegmentBytes: 600, knownBytes: 660, unknownSegments: 2))
        // The two stored segments average 300 (video first, say), but the estimate's share stays 200 a segment:
        // 660 known + 2 × 200.
        #expect(counts == ItemProgressCounts(bytesDone: 610, bytesTotal: 1060, segmentsDone: 2, segmentsTotal: 5))
        // Without a BANDWIDTH estimate, the stored average: 660 + 2 × 300.
        #expect(Downloader.estimator(estimate: nil, segments: 5)(totals) == 1260)
    }

    /// The per-item sums are kept by triggers; after any sequence of list replacements, completions and purges
    /// they must equal the sums over the rows.
    @Test func itemTotalsStayEqualToTheSumsOverTheResources() async throws {
        try await onOwnThread { try itemTotalsStayEqualToTheSumsOverTheResourcesBlocking() }
    }

    /// Long and blocking: runs on a thread of its own (``onOwnThread(_:)``).
    func itemTotalsStayEqualToTheSumsOverTheResourcesBlocking() throws {
        let (store, dir) = try makeStore()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ids = ["a", "b", "c"]
        for id in ids { try store.insert(DownloadItem(id: id, url: "https://x/\(id).m3u8")) }
        var generator = SystemRandomNumberGenerator()
        func randomList() -> [ItemResource] {
            (0..<Int.random(in: 0..<30, using: &generator)).map { _ in
                let n = Int.random(in: 0..<40, using: &generator)  // repeats: the same key twice in one list
                return ItemResource(
                    key: "k\(n)", url: "u\(n)", kind: ["segment", "segment", "playlist", "key", "init"].randomElement(using: &generator)!,
                    size: Bool.random(using: &generator) ? Int64(n * 10) : nil)
            }
        }
        for step in 0..<300 {
            let id = ids.randomElement(using: &generator)!
            switch Int.random(in: 0..<10, using: &generator) {
            case 0, 1:
                try store.setResources(id, randomList())
            case 2:
                try store.purge(id)
                try store.insert(DownloadItem(id: id, url: "https://x/\(id).m3u8"))
            default:
                let keys = try store.resources(id).map(\.key)
                if let key = keys.randomElement(using: &generator) {
                    try store.markDone(id, key: key, size: Int64.random(in: 0..<500, using: &generator), estimatedTotal: { _ in 0 })
                }
            }
            for id in ids {
                let (kept, summed) = try store.read { db in
                    (try ItemStore.resourceTotals(db, id: id), try ItemStore.summedResourceTotals(db, id: id))
                }
                #expect(kept == summed, "item \(id) after step \(step)")
            }
        }
    }

    @Test func itemsFromBeforeTheTotalsGetThemFromTheirRows() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-items-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ItemStore(directory: dir.path)
            try store.insert(DownloadItem(id: "old", url: "https://x/m.m3u8"))
            try store.setResources(
                "old", [ItemResource(key: "s1", url: "s1", kind: "segment"), ItemResource(key: "s2", url: "s2", kind: "segment", size: 7)])
            try store.markDone("old", key: "s1", size: 40, estimatedTotal: { _ in 0 })
            // Back to the schema an older hlscache left: no item_totals, no triggers.
            try store.write { db in
                try db.execute(
                    sql: """
                        DROP TRIGGER item_totals_insert; DROP TRIGGER item_totals_delete; DROP TRIGGER item_totals_update;
                        DROP TRIGGER item_totals_purge; DROP TABLE item_totals; DELETE FROM grdb_migrations WHERE identifier = 'v4-item-totals'
                        """)
            }
        }
        let store = try ItemStore(directory: dir.path)
        let totals = try store.read { db in try ItemStore.resourceTotals(db, id: "old") }
        #expect(
            totals
                == ResourceTotals(
                    bytesDone: 40, segmentsDone: 1, segmentsTotal: 2, doneSegmentBytes: 40, knownBytes: 47, unknownSegments: 0))
    }

    /// A file from before `item_tags` (the items' tags only in their JSON column, one of them malformed): opening it
    /// fills the table, and the tag filter finds the items through the table's index; the triggers then keep it with
    /// every write of an item, and the rows go with the item.
    @Test func itemsFromBeforeTheTagTableAreFoundByTagThroughIt() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-items-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            let store = try ItemStore(directory: dir.path)
            for index in 0..<6 {
                var item = DownloadItem(
                    id: "t\(index)", url: "https://x/\(index).m3u8", now: Date(timeIntervalSince1970: 1_000 + Double(index)))
                item.tags = index.isMultiple(of: 2) ? ["even", "all"] : ["odd", "all"]
                try store.insert(item)
            }
            // Back to the schema an older hlscache left: no item_tags, no triggers; then rows written by it.
            try store.write { db in
                try db.execute(
                    sql: """
                        DROP TRIGGER item_tags_insert; DROP TRIGGER item_tags_update; DROP TRIGGER item_tags_delete; DROP TABLE item_tags;
                        DELETE FROM grdb_migrations WHERE identifier = 'v11-item-tags';
                        UPDATE items SET tags = '["odd","all","late"]' WHERE id = 't5';
                        UPDATE items SET tags = 'not json' WHERE id = 't4';
                        """)
            }
        }
        let store = try ItemStore(directory: dir.path)
        func ids(_ tags: [String]) throws -> [String] {
            var query = ItemQuery()
            query.tags = tags
            return try store.ids(query)
        }
        #expect(try ids(["even"]) == ["t0", "t2"], "t4's malformed tags count as none")
        #expect(try ids(["late"]) == ["t5"], "filled from the JSON as the old process left it")
        #expect(try ids(["all", "odd"]) == ["t1", "t3", "t5"])
        #expect(try ids(["nothing"]).isEmpty)
        let plan = try store.read { db in
            try Row.fetchAll(
                db, sql: "EXPLAIN QUERY PLAN SELECT id FROM items WHERE id IN (SELECT item_id FROM item_tags WHERE tag = ?)",
                arguments: ["even"]
            )
            .map { $0["detail"] as String }
        }
        #expect(plan.contains { $0.contains("item_tags_tag") }, "an index lookup: \(plan)")

        // Kept with the item, in the same write: changed, replaced (a save), removed.
        try store.update("t0") { $0.tags = ["solo"] }
        #expect(try ids(["even"]) == ["t2"] && ids(["solo"]) == ["t0"])
        try store.apply(.pause, to: "t2")
        #expect(try ids(["even"]) == ["t2"], "a state change keeps the tags")
        try store.purge("t2")
        #expect(try ids(["even"]).isEmpty)
        let left = try store.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM item_tags WHERE item_id = 't2'") }
        #expect(left == 0, "the rows go with the item")
        // A write that fails leaves the item and its tag rows as they were (one transaction).
        #expect(throws: DownloadError.self) {
            try store.write { db in
                try db.execute(sql: "UPDATE items SET tags = '[\"rolled-back\"]' WHERE id = 't1'")
                throw DownloadError.corrupted.with("stop")
            }
        }
        #expect(try ids(["rolled-back"]).isEmpty && ids(["odd"]) == ["t1", "t3", "t5"])
    }

    /// Cursor pages over a real items.sqlite: each page starts after the cursor's item, in every sort and direction.
    @Test func cursorPagesStartAfterTheirItem() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-items-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try ItemStore(directory: dir.path)
        for index in 0..<13 {
            var item = DownloadItem(
                id: "i\(index)", url: "https://x/\(index).m3u8", now: Date(timeIntervalSince1970: 1_000.25 + Double(index) * 1.1))
            item.bytesDone = Int64(index % 4) * 1000
            item.title = index % 3 == 0 ? nil : "Title \(index % 5)"
            try store.insert(item)
        }
        for sort in ItemQuery.Sort.allCases {
            for descending in [false, true] {
                var query = ItemQuery()
                query.sort = sort
                query.descending = descending
                let all = try store.ids(query)
                var seen: [String] = []
                query.limit = 3
                var log: [String] = []
                for _ in 0..<10 {
                    let page = try store.page(query)
                    seen += page.items.map(\.id)
                    log.append(page.items.map(\.id).joined(separator: ",") + " next " + (page.nextCursor?.token ?? "-"))
                    guard let next = page.nextCursor else { break }
                    let decoded = try #require(ItemQuery.Cursor(token: next.token))
                    #expect(decoded == next, "\(sort) \(descending): the token reads back")
                    query.after = decoded
                }
                #expect(seen == all, "\(sort) \(descending ? "descending" : ""): \(log)")
            }
        }
    }
}
