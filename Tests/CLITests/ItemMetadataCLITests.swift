import Foundation
import HLSTestSupport
import Testing

/// `fetch --title --tag --poster --meta --max-size --window --daily-limit`, `ls` filters and columns, `show`, `set` (issue 27), on a
/// real cache directory; `--detach` records the items without contacting any origin.
@Suite struct ItemMetadataCLITests {
    @Test func metadataIsRecordedListedFilteredAndChanged() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-meta-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let cache = ["--cache-dir", dir.path]
        let first = try await CLI.run(
            [
                "fetch", "http://127.0.0.1:1/course1/a.m3u8", "--detach", "--id", "a", "--title", "Lesson A", "--tag", "physics", "--tag",
                "week1",
                "--poster", "http://127.0.0.1:1/a.jpg", "--meta", #"{"room": "B", "n": 2}"#, "--max-size", "1GiB", "--window",
                "22:00-06:00", "--daily-limit", "500MiB",
            ] + cache)
        #expect(first.status == 0, "\(first.stderr)")
        let second = try await CLI.run(
            ["fetch", "http://127.0.0.1:1/course2/b.m3u8", "--detach", "--id", "b", "--tag", "chemistry"] + cache)
        #expect(second.status == 0, "\(second.stderr)")

        let table = try await CLI.run(["ls"] + cache)
        #expect(
            table.stdout.contains("TITLE") && table.stdout.contains("Lesson A") && table.stdout.contains("physics,week1"), "\(table.stdout)"
        )
        let tagged = try await CLI.run(["ls", "--tag", "physics", "--json"] + cache)
        let lines = tagged.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(object["id"] as? String == "a" && object["title"] as? String == "Lesson A")
        #expect(object["tags"] as? [String] == ["physics", "week1"])
        #expect((object["meta"] as? [String: Any])?["room"] as? String == "B")
        #expect(object["maxSize"] as? Int == 1 << 30 && object["window"] as? String == "22:00-06:00")
        #expect(object["dailyLimit"] as? Int == 500 << 20, "the item's own daily limit")
        #expect(object["posterURL"] as? String == "http://127.0.0.1:1/a.jpg")
        #expect(try await CLI.run(["ls", "--url", "course2", "--json"] + cache).stdout.contains(#""id":"b""#))
        #expect(
            try await CLI.run(["ls", "--state", "queued,paused", "--sort=-id", "--limit", "1", "--json"] + cache).stdout.contains(
                #""id":"b""#))
        #expect(try await CLI.run(["ls", "--never-played", "--json"] + cache).stdout.split(separator: "\n").count == 2)

        let shown = try await CLI.run(["show", "a"] + cache)
        #expect(shown.stdout.contains("title: Lesson A") && shown.stdout.contains(#"meta: {"n":2,"room":"B"}"#), "\(shown.stdout)")

        let changed = try await CLI.run(
            ["set", "a", "--title", "", "--clear-tags", "--meta", "none", "--max-size", "none", "--json"] + cache)
        #expect(changed.status == 0, "\(changed.stderr)")
        let after = try #require(try JSONSerialization.jsonObject(with: Data(changed.stdout.utf8)) as? [String: Any])
        #expect(after["title"] == nil && after["tags"] == nil && after["meta"] == nil && after["maxSize"] == nil)
        #expect(after["window"] as? String == "22:00-06:00")
        #expect(after["dailyLimit"] as? Int == 500 << 20)
        let limited = try await CLI.run(["set", "b", "--daily-limit", "2GiB"] + cache)
        #expect(limited.status == 0 && limited.stdout.contains("daily limit 2"), "\(limited.stdout) \(limited.stderr)")
        let unlimited = try await CLI.run(["set", "a", "--daily-limit", "none", "--json"] + cache)
        #expect(unlimited.status == 0 && unlimited.stdout.contains("dailyLimit") == false, "\(unlimited.stdout)")

        for bad in [
            ["--tag", "a,b"], ["--meta", "[1]"], ["--window", "25:00-01:00"], ["--max-size", "lots"], ["--poster", "ftp://x/y"],
            ["--daily-limit", "0"],
        ] {
            let refused = try await CLI.run(["fetch", "http://127.0.0.1:1/c.m3u8", "--detach"] + bad + cache)
            #expect(refused.status == 64, "\(bad): \(refused.status) \(refused.stderr)")
        }
    }
}

/// Webhooks without a secret would send what no receiver can check: `serve` refuses to start (issue 27).
@Suite struct WebhookSettingsCLITests {
    @Test func serveRefusesWebhooksWithoutASecret() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-hooks-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let refused = try await CLI.run(
            ["serve", "--listen", "127.0.0.1:0", "--cache-dir", dir.path, "--log-level", "error"],
            environment: ["HLSCACHE_WEBHOOKS_URLS": "http://127.0.0.1:9/hook"])
        #expect(refused.status == 64, "\(refused.status) \(refused.stderr)")
        #expect(refused.stderr.contains("webhooks.secret"))
        let short = try await CLI.run(
            ["serve", "--listen", "127.0.0.1:0", "--cache-dir", dir.path, "--log-level", "error"],
            environment: ["HLSCACHE_WEBHOOKS_URLS": "http://127.0.0.1:9/hook", "HLSCACHE_WEBHOOKS_SECRET": "short"])
        #expect(short.status == 78, "a bad configuration value: \(short.status) \(short.stderr)")
        let notURL = try await CLI.run(
            ["serve", "--listen", "127.0.0.1:0", "--cache-dir", dir.path], environment: ["HLSCACHE_WEBHOOKS_URLS": "ftp://x/hook"])
        #expect(notURL.status == 78 && notURL.stderr.contains("webhooks.urls"), "\(notURL.stderr)")
    }

    /// `ls --limit N` prints the next page's cursor on stderr; `ls --after` with it lists the rest, every item once;
    /// a cursor of another sort, or garbage, is refused with a clear error.
    @Test func listPagesWithACursor() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-pages-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let cache = ["--cache-dir", dir.path]
        for index in 0..<5 {
            let made = try await CLI.run(["fetch", "http://127.0.0.1:1/s\(index).m3u8", "--detach", "--id", "item\(index)"] + cache)
            #expect(made.status == 0, "\(made.stderr)")
        }
        var seen: [String] = []
        var after: [String] = []
        for _ in 0..<5 {
            let page = try await CLI.run(["ls", "--sort=-id", "--limit", "2", "--json"] + after + cache)
            #expect(page.status == 0, "\(page.stderr)")
            for line in page.stdout.split(separator: "\n") {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                seen.append(try #require(object["id"] as? String))
            }
            guard let range = page.stderr.range(of: "--after ") else { break }
            after = ["--after", String(page.stderr[range.upperBound...].prefix { !$0.isWhitespace })]
        }
        #expect(seen == ["item4", "item3", "item2", "item1", "item0"])
        #expect(try await CLI.run(["ls", "--sort=-id", "--limit", "5"] + cache).stderr.contains("--after") == false, "no page follows")

        let first = try await CLI.run(["ls", "--sort=id", "--limit", "1"] + cache)
        let range = try #require(first.stderr.range(of: "--after "))
        let token = first.stderr[range.upperBound...].prefix { !$0.isWhitespace }
        let otherSort = try await CLI.run(["ls", "--sort=-id", "--after", String(token)] + cache)
        #expect(otherSort.status != 0 && otherSort.stderr.contains("same --sort"), "\(otherSort.stderr)")
        let garbage = try await CLI.run(["ls", "--after", "not a cursor"] + cache)
        #expect(garbage.status != 0 && garbage.stderr.contains("not a cursor"), "\(garbage.stderr)")
    }
}
