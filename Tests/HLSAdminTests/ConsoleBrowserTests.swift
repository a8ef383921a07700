import Foundation
import HLSDownloader
import HLSTestSupport
import Testing

/// The console in a real browser (headless Chromium over the DevTools protocol, ``HeadlessChromium``): the test
/// does what a person does — fills the form, presses the buttons, presses play — and checks each result through
/// the API. Every wait is for an event with a generous bound (120 s), never a measured time.
@Suite("Console in headless Chromium")
struct ConsoleBrowserTests {
    /// With `HLSCACHE_SCREENSHOTS=DIR` the screenshots are written there too (docs/images when refreshing the docs).
    static let screenshotDirectory = ProcessInfo.processInfo.environment["HLSCACHE_SCREENSHOTS"].map { URL(fileURLWithPath: $0) }

    /// Two copies of an ffmpeg-made stream (two video variants, an audio group): `/a/` plays, `/b/` stalls.
    static func origin() async throws -> URL {
        let made = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-console-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: made, to: root.appendingPathComponent("a"))
        try FileManager.default.copyItem(at: made, to: root.appendingPathComponent("b"))
        return root
    }

    /// Runs `expression` in the page until it is neither `null` nor `false`; returns that value (JSON text).
    @discardableResult
    static func until(_ page: HeadlessChromium.Page, _ h: AdminHarness, _ what: String, _ expression: String) async throws -> String {
        do {
            return try await h.eventually(what, timeout: .seconds(120)) { () -> String? in
                // An expression that throws (the page still loading, a row not drawn yet) is "not yet".
                guard let value = try? await page.evaluate(expression) else { return nil }
                return value == "null" || value == "false" ? nil : value
            }
        } catch {
            throw TestFailure(description: "\(error); the page logged: \(page.browser.log.suffix(20))")
        }
    }

    static func row(_ id: String) -> String { "document.querySelector('tr[data-id=\"\(id)\"]')" }

    static func press(_ page: HeadlessChromium.Page, _ action: String, on id: String, times: Int = 1) async throws {
        _ = try await page.evaluate(
            "(() => { const b = \(row(id)).querySelector('[data-action=\"\(action)\"]'); if (b.hidden) throw new Error('\(action) is hidden'); "
                + String(repeating: "b.click(); ", count: times) + "return true; })()")
    }

    static func item(_ h: AdminHarness, _ id: String, headers: [(String, String)] = []) async throws -> (status: Int, json: [String: Any]) {
        let answer = try await h.request(.GET, h.api("/items/\(id)"), headers: headers)
        return (answer.status, answer.json)
    }

    static func save(_ png: Data, as name: String) throws {
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]), "a PNG")
        #expect(png.count > 10_000, "a rendered page, not a blank one")
        if let directory = screenshotDirectory {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            try png.write(to: directory.appendingPathComponent(name))
        }
    }

    @Test(
        "add a stream from the form, watch it reach cached live, preview it, pause/resume/lock/unlock/delete from the buttons",
        .enabled(if: Chromium.path != nil, "chromium is not installed (apt-get install chromium, or make test-deps)"))
    func manageItemsFromTheConsole() async throws {
        let root = try await Self.origin()
        defer { try? FileManager.default.removeItem(at: root) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        // The second stream's second segment never finishes: its item stays downloading until paused.
        h.origin.setFault(.stallAfter(bytes: 1000), for: "/b/v0/seg001.ts")
        let browser = try HeadlessChromium(executable: try #require(Chromium.path), width: 1280, height: 1100)
        do {
            let page = try await browser.open(h.base + "/")
            try await Self.until(page, h, "the console to follow /events", "document.getElementById('conn').textContent === 'live'")
            // Every state each row shows, in order.
            try await page.evaluate(
                """
                window.seen = {};
                new MutationObserver(() => {
                  for (const row of document.querySelectorAll('#items tr')) {
                    const list = window.seen[row.dataset.id] = window.seen[row.dataset.id] || [];
                    if (list[list.length - 1] !== row.dataset.state) list.push(row.dataset.state);
                  }
                }).observe(document.getElementById('items'), {subtree: true, childList: true, attributes: true});
                true
                """)

            // The form: URL, variants, expiry, title, tags, id (seconds left blank: the whole stream).
            func add(url: String, id: String, variants: String, expires: String, title: String = "", tags: String = "") async throws {
                try await page.evaluate(
                    """
                    (() => {
                      document.getElementById('add-url').value = '\(url)';
                      document.getElementById('add-variants').value = '\(variants)';
                      document.getElementById('add-expires').value = '\(expires)';
                      document.getElementById('add-title').value = '\(title)';
                      document.getElementById('add-tags').value = '\(tags)';
                      document.getElementById('add-id').value = '\(id)';
                      document.getElementById('add-submit').click();
                      return true;
                    })()
                    """)
            }
            try await add(
                url: h.originURL("/a/master.m3u8"), id: "from-form", variants: "best", expires: "7d", title: "Test card",
                tags: "class-a, kiosk")
            try await Self.until(page, h, "from-form to show cached", "\(Self.row("from-form"))?.dataset.state === 'cached'")
            let progress = try await page.evaluate("\(Self.row("from-form")).querySelector('.pct').textContent")
            #expect(progress == "\"100.0%\"")
            let added = try await Self.item(h, "from-form")
            #expect(added.json["state"] as? String == "cached")
            let renditions = added.json["renditions"] as? [String] ?? []
            #expect(!renditions.isEmpty && !renditions.contains { $0.contains("/v1/") }, "variants best: \(renditions)")
            let expires = try #require((added.json["expiresAt"] as? String).flatMap(ConsoleTests.date))
            #expect(abs(expires.timeIntervalSinceNow - 7 * 86400) < 3600, "expires 7d")
            #expect(added.json["title"] as? String == "Test card")
            #expect(added.json["tags"] as? [String] == ["class-a", "kiosk"])
            #expect(try await page.evaluate("\(Self.row("from-form")).querySelector('.name').textContent") == "\"Test card (from-form)\"")
            #expect(
                try await page.evaluate("[...\(Self.row("from-form")).querySelectorAll('.tag')].map(t => t.textContent).join()")
                    == "\"class-a,kiosk\"")

            // A download that cannot finish: the row learns `downloading` from /events only (the POST answers `queued`).
            try await add(url: h.originURL("/b/v0/index.m3u8"), id: "stalled", variants: "all", expires: "")
            try await Self.until(page, h, "stalled to show downloading", "\(Self.row("stalled"))?.dataset.state === 'downloading'")
            // The filter matches tags too: "kiosk" leaves the tagged item only; cleared, both are back.
            func filter(_ text: String) async throws {
                try await page.evaluate(
                    "(() => { const f = document.getElementById('filter'); f.value = '\(text)'; f.dispatchEvent(new Event('input')); return true; })()"
                )
            }
            try await filter("kiosk")
            try await Self.until(
                page, h, "the tag filter", "[...document.querySelectorAll('#items tr')].map(r => r.dataset.id).join() === 'from-form'")
            try await filter("")
            try await Self.until(page, h, "both rows again", "document.querySelectorAll('#items tr').length === 2")
            try await Self.press(page, "pause", on: "stalled")
            try await Self.until(page, h, "stalled to show paused", "\(Self.row("stalled")).dataset.state === 'paused'")
            #expect(try await Self.item(h, "stalled").json["state"] as? String == "paused")
            try await Self.press(page, "resume", on: "stalled")
            let resumed = try await h.eventually("the API to show stalled running again") { () -> String? in
                let state = try await Self.item(h, "stalled").json["state"] as? String
                return state == "queued" || state == "downloading" ? state : nil
            }
            #expect(resumed == "queued" || resumed == "downloading")
            try await Self.until(page, h, "stalled to show downloading again", "\(Self.row("stalled")).dataset.state === 'downloading'")

            try await Self.press(page, "lock", on: "from-form")
            try await Self.until(
                page, h, "from-form to show locked", "\(Self.row("from-form")).querySelector('.lock').textContent === 'locked'")
            #expect(try await Self.item(h, "from-form").json["locked"] as? Bool == true)

            // The preview: the browser's own HLS playback of the item's proxy URL.
            try await Self.press(page, "play", on: "from-form")
            let time = try await Self.until(
                page, h, "the preview to play 1.5 s",
                "document.getElementById('player').currentTime > 1.5 && document.getElementById('player').currentTime")
            #expect(Double(time) ?? 0 > 1.5, "\(time)")
            let shown = try await page.evaluate("document.getElementById('preview-time').textContent")
            #expect(Double(shown.trimmingCharacters(in: CharacterSet(charactersIn: "\""))) ?? 0 > 0, "the page shows the time: \(shown)")
            // What the preview read from the cache shows in the traffic plot.
            try await Self.until(
                page, h, "the plot to count bytes from the cache",
                "Number(document.getElementById('traffic-plot').dataset.bytesFromCache) > 0")
            try await Self.until(
                page, h, "the states plot to count the items", "document.getElementById('states-plot').dataset.total === '2'")
            let stats = try await h.request(.GET, h.api("/stats")).json
            #expect(((stats["lastHour"] as? [String: Any])?["bytesFromCache"] as? Int ?? 0) > 0, "\(stats)")
            let bars = try await page.evaluate("document.querySelectorAll('#traffic-plot rect.cache').length")
            #expect((Int(bars) ?? 0) > 0)
            // Pause the stalled item again for the picture: one cached and playing, one paused.
            try await Self.press(page, "pause", on: "stalled")
            try await Self.until(page, h, "stalled to show paused", "\(Self.row("stalled")).dataset.state === 'paused'")
            try await Self.until(
                page, h, "the states plot to show the pause", "document.getElementById('states-summary').textContent.includes('1 paused')")
            try Self.save(try await page.screenshot(), as: "console.png")

            try await Self.press(page, "unlock", on: "from-form")
            try await Self.until(
                page, h, "from-form to show unlocked", "\(Self.row("from-form")).querySelector('.lock').textContent === ''")
            #expect(try await Self.item(h, "from-form").json["locked"] as? Bool == false)

            // Delete asks once more on the same button; the second press deletes.
            try await Self.press(page, "delete", on: "stalled")
            #expect(
                try await page.evaluate("\(Self.row("stalled")).querySelector('[data-action=\"delete\"]').textContent")
                    == "\"Really delete?\"")
            #expect(try await Self.item(h, "stalled").status == 200, "one press deletes nothing")
            try await Self.press(page, "delete", on: "stalled")
            try await Self.until(page, h, "the stalled row to go", "\(Self.row("stalled")) === null")
            #expect(try await Self.item(h, "stalled").status == 404)

            let seen = try await page.evaluate("window.seen['from-form'] || []")
            #expect(seen.hasSuffix("\"cached\"]"), "\(seen)")
            let seenStalled = try await page.evaluate("window.seen['stalled'] || []")
            #expect(seenStalled.contains("\"downloading\",\"paused\""), "\(seenStalled)")
            #expect(!browser.log.contains { $0.hasPrefix("exception") }, "\(browser.log)")
            // The page's CSP let its own script, style, requests and the preview through (Chromium logs each refusal).
            #expect(!browser.log.contains { $0.contains("Content Security Policy") }, "\(browser.log)")
        } catch {
            await browser.close()
            throw error
        }
        await browser.close()
        await h.shutdown()
    }

    @Test(
        "with api.token the console gets 401, asks for the token, refuses a wrong one, and works with the right one",
        .enabled(if: Chromium.path != nil, "chromium is not installed (apt-get install chromium, or make test-deps)"))
    func consoleWithToken() async throws {
        let root = try await Self.origin()
        defer { try? FileManager.default.removeItem(at: root) }
        let token = "console-token-0123456789abcdef"
        let h = try await AdminHarness(root: root, configure: { $0.token = token })
        defer { h.shutdownLater() }
        let bearer = [("Authorization", "Bearer \(token)")]
        var waiting = DownloadItem(id: "waiting", url: h.originURL("/a/v1/index.m3u8"), precacheSeconds: 2)
        waiting.state = .paused
        try h.items.insert(waiting)
        #expect(try await h.request(.GET, h.api("/stats")).status == 401)
        #expect(try await h.request(.GET, h.base + "/").status == 200, "the page itself holds no data")

        let browser = try HeadlessChromium(executable: try #require(Chromium.path), width: 1280, height: 700)
        do {
            let page = try await browser.open(h.base + "/")
            try await Self.until(
                page, h, "the token prompt",
                "!document.getElementById('token-form').hidden && document.getElementById('console').hidden && document.getElementById('conn').textContent"
            )
            #expect(try await page.evaluate("document.querySelectorAll('#items tr').length") == "0", "nothing was shown without the token")
            try Self.save(try await page.screenshot(), as: "console-token.png")

            func enter(_ text: String) async throws {
                try await page.evaluate(
                    "(() => { document.getElementById('token-input').value = '\(text)'; document.getElementById('token-submit').click(); return true; })()"
                )
            }
            try await enter("not-the-token-0123456789")
            try await Self.until(
                page, h, "the wrong token to be refused", "document.getElementById('token-error').textContent.includes('refused')")
            #expect(try await page.evaluate("document.getElementById('console').hidden") == "true")

            try await enter(token)
            try await Self.until(
                page, h, "the console with the token",
                "document.getElementById('conn').textContent === 'live' && \(Self.row("waiting"))?.dataset.state === 'paused'")
            #expect(try await page.evaluate("sessionStorage.getItem('hlscache.token')") == "\"\(token)\"")
            try await Self.press(page, "resume", on: "waiting")
            let state = try await h.eventually("the API to show waiting resumed") { () -> String? in
                let state = try await Self.item(h, "waiting", headers: bearer).json["state"] as? String
                return state == "paused" ? nil : state
            }
            #expect(["queued", "downloading", "partiallyCached", "cached"].contains(state))
            // Live over /events with ?access_token: the download's end reaches the row.
            try await Self.until(
                page, h, "waiting to finish on the page", "['partiallyCached', 'cached'].includes(\(Self.row("waiting")).dataset.state)")

            // Forget token: the prompt again, nothing kept in the tab.
            try await page.evaluate("(() => { document.getElementById('forget-token').click(); return true; })()")
            try await Self.until(
                page, h, "the prompt after forgetting",
                "!document.getElementById('token-form').hidden && document.getElementById('console').hidden")
            #expect(try await page.evaluate("sessionStorage.getItem('hlscache.token')") == "null")
            #expect(!browser.log.contains { $0.contains("Content Security Policy") }, "\(browser.log)")
            // A script injected into the page (as an XSS would) does not run, and the refusal is what the log shows.
            try await page.evaluate(
                "(() => { const s = document.createElement('script'); s.textContent = 'window.injected = true'; document.body.appendChild(s); return true; })()"
            )
            #expect(try await page.evaluate("window.injected === undefined") == "true")
            _ = try await h.eventually("Chromium to report the refused script") {
                browser.log.contains { $0.contains("Content Security Policy") } ? true : nil
            }
        } catch {
            await browser.close()
            throw error
        }
        await browser.close()
        await h.shutdown()
    }

    /// `HLSCACHE_CONSOLE_ITEMS=10000` runs it with more items (scripts/console-scale.sh prints the figure).
    @Test(
        "thousands of items: the table shows a page of them, a removal and a state change show live, the pager and the filter work",
        .enabled(if: Chromium.path != nil, "chromium is not installed (apt-get install chromium, or make test-deps)"))
    func manyItems() async throws {
        let count = Int(ProcessInfo.processInfo.environment["HLSCACHE_CONSOLE_ITEMS"] ?? "") ?? 3000
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-console-many-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let id: @Sendable (Int) -> String = { String(format: "bulk-%05d", $0) }
        let items = h.items
        let origin = h.originURL("/bulk")
        try await offThread {
            for n in 0..<count {
                var item = DownloadItem(id: id(n), url: "\(origin)/\(n).m3u8", precacheSeconds: 2)
                item.state = .paused
                try items.insert(item)
            }
        }
        let browser = try HeadlessChromium(executable: try #require(Chromium.path), width: 1280, height: 900)
        do {
            let page = try await browser.open(h.base + "/")
            let rows = min(count, 100)
            let drawnAt = try await Self.until(
                page, h, "the first page of \(count) items",
                "document.getElementById('item-count').textContent === '(\(count))' && document.querySelectorAll('#items tr').length === \(rows) && performance.now()"
            )
            // Figures for scripts/console-scale.sh (printed, never asserted): the listing is the server's, the rest the page's.
            let lastPage = try await page.evaluate(
                "Math.round(Math.max(...performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/items')).map(e => e.responseEnd)))"
            )
            let drawn = Int(Double(drawnAt) ?? 0), listed = Int(lastPage) ?? 0
            print(
                "console: \(count) items: last page of GET /items in at \(listed) ms, shown at \(drawn) ms (\(drawn - listed) ms after it)")
            #expect(try await page.evaluate("document.querySelector('#items tr').dataset.id") == "\"\(id(0))\"")
            // Read in pages of 500 (the server pages the list).
            let requests = try await page.evaluate(
                "performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/items?limit=500')).length")
            #expect(Int(requests) == (count + 499) / 500, "\(requests) list requests for \(count) items")
            try await Self.until(page, h, "the console to follow /events", "document.getElementById('conn').textContent === 'live'")

            // Removed through the API from the page shown: its row goes, the next item moves up.
            let removed = id(1), failing = id(count - 2), last = id(count - 1)
            #expect(try await h.request(.DELETE, h.api("/items/\(removed)")).status == 204)
            try await Self.until(
                page, h, "the removed row to go",
                "\(Self.row(removed)) === null && document.getElementById('item-count').textContent === '(\(count - 1))' && document.querySelectorAll('#items tr').length === \(min(count - 1, 100))"
            )
            // Resumed through the API on the last page: its origin answers 404, so it fails; the row follows over /events.
            #expect(try await h.request(.POST, h.api("/items/\(failing)/resume")).status == 200)
            try await page.evaluate("(() => { document.getElementById('page-last').click(); return true; })()")
            try await Self.until(page, h, "the last page", "\(Self.row(last)) !== null")
            try await Self.until(page, h, "the resumed row to show failed", "\(Self.row(failing)).dataset.state === 'failed'")
            // Locked by another process (as `hlscache lock` does: items.sqlite only; no state changes) and unlocked through
            // the API by another client: the row follows over /events (`lock`), without a reload of the list.
            let listReads = try await page.evaluate(
                "performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/items?')).length")
            _ = try h.downloader.setLocked(last, true)
            try await Self.until(
                page, h, "a lock made elsewhere to show", "\(Self.row(last)).querySelector('.lock').textContent === 'locked'")
            #expect(try await h.request(.POST, h.api("/items/\(last)/unlock")).status == 200)
            try await Self.until(page, h, "an unlock made elsewhere to show", "\(Self.row(last)).querySelector('.lock').textContent === ''")
            #expect(
                try await page.evaluate("performance.getEntriesByType('resource').filter(e => e.name.includes('/api/v1/items?')).length")
                    == listReads,
                "no list read for a lock")

            try await page.evaluate(
                "(() => { const f = document.getElementById('filter'); f.value = '\(last)'; f.dispatchEvent(new Event('input')); return true; })()"
            )
            try await Self.until(
                page, h, "the filter to leave one row",
                "[...document.querySelectorAll('#items tr')].map(r => r.dataset.id).join() === '\(last)'")
            #expect(!browser.log.contains { $0.hasPrefix("exception") }, "\(browser.log)")
        } catch {
            await browser.close()
            throw error
        }
        await browser.close()
        await h.shutdown()
    }
}
