import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import Testing

enum Chromium {
    static let path: String? = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        .first { FileManager.default.isExecutableFile(atPath: $0) }
}

@Suite("Status page")
struct StatusPageTests {
    @Test("GET / is a self-contained HTML page with no external assets")
    func pageIsSelfContained() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-admin-page-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let h = try await AdminHarness(root: dir)
        defer { h.shutdownLater() }
        let page = try await h.request(.GET, h.base + "/")
        #expect(page.status == 200)
        #expect(page.headers.first(name: "Content-Type") == "text/html; charset=utf-8")
        #expect(page.headers.first(name: "Content-Security-Policy")?.contains("default-src 'none'") == true)
        #expect(!page.text.contains("src=\"http"), "no external scripts or images")
        #expect(!page.text.contains("href=\"http"), "no external style sheets")
        #expect(page.text.contains("/api/v1/events"))
        let post = try await h.request(.POST, h.base + "/", json: "{}")
        #expect(post.status == 405)
        await h.shutdown()
    }

    @Test(
        "headless Chromium renders the items with their state and progress from the API and /events",
        .enabled(if: Chromium.path != nil, "chromium is not installed (apt-get install chromium, or make test-deps)"))
    func pageInChromium() async throws {
        let root = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let h = try await AdminHarness(root: root)
        defer { h.shutdownLater() }
        let created = try await h.request(.POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/master.m3u8"))","id":"on-page","seconds":2}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("partiallyCached") { try h.items.item("on-page")?.state == .partiallyCached ? true : nil }
        // A paused item too, so the page shows two states.
        var waiting = DownloadItem(id: "waiting", url: h.originURL("/v1/index.m3u8"), precacheSeconds: 2)
        waiting.state = .paused
        try h.items.insert(waiting)

        let chromium = try #require(Chromium.path)
        let url = h.base + "/"
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-chromium-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: profile) }
        // Chromium dumps the DOM when --timeout ends (the open EventSource keeps --virtual-time-budget from ever
        // ending); on a loaded machine the page's requests may need longer, so try a few bounded waits.
        var html = ""
        for wait in [6000, 15000, 30000] {
            let dom = try await offThread {
                try FFmpeg.run(
                    chromium,
                    [
                        "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                        "--user-data-dir=\(profile.path)", "--timeout=\(wait)", "--dump-dom", url,
                    ], timeout: 120)
            }
            html = String(decoding: dom.stdout, as: UTF8.self)
            if html.contains(#"id="item-waiting""#) && html.contains(#"id="item-on-page""#) { break }
        }
        #expect(html.contains(#"id="item-on-page""#), "\(html.suffix(3000))")
        #expect(html.contains(#"class="state state-partiallyCached">partiallyCached"#), "\(html.suffix(3000))")
        #expect(html.contains(#"id="item-waiting""#))
        #expect(html.contains(#"class="state state-paused">paused"#))
        #expect(html.contains("100.0%"), "the finished item's progress bar")
        await h.shutdown()
    }
}
