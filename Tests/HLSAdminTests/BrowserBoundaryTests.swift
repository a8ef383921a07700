import Foundation
import HLSDownloader
import HLSTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real browser on the same machine (headless Chromium): a page from a foreign site (`evil.test`, mapped to
/// 127.0.0.1 by `--host-resolver-rules`, so a real cross-site origin that stays on loopback) gets nothing from
/// hlscache, and a page on a loopback host plays an AES-128 stream with the browser's own `<video>` HLS support and
/// reads the API. Pages report what happened by requesting `/report?name=value` from the server that served them;
/// the test waits for those requests (bounded, never a measured time).
@Suite("Browser (headless Chromium): the web-page boundary and native HLS playback through the proxy")
struct BrowserBoundaryTests {
    static let script = """
        const proxy = "PROXY";
        const report = (name, value) => fetch("/report?" + name + "=" + encodeURIComponent(value)).catch(() => {});
        async function attempt(name, request) {
          try { const answer = await request(); const body = await answer.text(); report(name, "read-" + answer.status + "-" + body.length); }
          catch (error) { report(name, "blocked"); }
        }
        function play(name, url) {
          const video = document.createElement("video");
          video.muted = true; video.autoplay = true; video.playsInline = true;
          video.addEventListener("error", () => report(name, "error"));
          video.addEventListener("timeupdate", () => { if (video.currentTime > 1.5 && !video.reported) { video.reported = true; report(name, "played"); } });
          document.body.appendChild(video);
          video.src = url;
        }
        """

    static func page(_ body: String, proxy: String) -> String {
        "<!doctype html><html><head><meta charset=\"utf-8\"></head><body><script>\n"
            + script.replacingOccurrences(of: "PROXY", with: proxy) + "\n" + body + "\n</script></body></html>\n"
    }

    @Test(
        "a page from another site cannot read keys or the API nor change an item; a loopback page plays AES-128 and reads the API",
        .enabled(if: Chromium.path != nil, "chromium is not installed (apt-get install chromium, or make test-deps)"))
    func hostileAndLocalPages() async throws {
        let stream = try await Streams.stream("aes128") { try FFmpeg.makeAES128(in: $0) }
        let h = try await AdminHarness(root: stream)
        defer { h.shutdownLater() }
        try h.items.insert(DownloadItem(id: "target", url: h.originURL("/index.m3u8"), precacheSeconds: 2))
        _ = try await h.eventually("the item to settle") {
            let state = try h.items.item("target")?.state
            return state == .partiallyCached || state == .cached ? true : nil
        }
        let playlist = try await h.request(.GET, h.proxyURL("/index.m3u8"))
        let keyPath = try #require(playlist.text.firstMatch(of: /\/keys\/[0-9a-f]{32}/).map { String($0.output) })

        // The pages' own server: another origin on 127.0.0.1.
        let pagesRoot = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-pages-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: pagesRoot, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: pagesRoot) }
        let hostile = Self.page(
            """
            attempt("key", () => fetch(proxy + "\(keyPath)"));
            attempt("items", () => fetch(proxy + "/api/v1/items"));
            attempt("lockjson", () => fetch(proxy + "/api/v1/items/target/lock", {method: "POST", headers: {"Content-Type": "application/json"}, body: "{}"}));
            fetch(proxy + "/api/v1/items/target/pause", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: "{}"})
              .then(() => report("nocors", "sent"), () => report("nocors", "failed"));
            const sink = document.createElement("iframe");
            sink.name = "sink";
            document.body.appendChild(sink);
            const form = document.createElement("form");
            form.method = "POST"; form.enctype = "text/plain"; form.target = "sink";
            form.action = proxy + "/api/v1/items/target/lock";
            const field = document.createElement("input"); field.name = "{\\"a\\":\\""; field.value = "\\"}";
            form.appendChild(field); document.body.appendChild(form);
            sink.addEventListener("load", () => report("form", "submitted"));
            form.submit();
            play("video", proxy + "/http/127.0.0.1:\(h.origin.port)/index.m3u8");
            """, proxy: h.base)
        let local = Self.page(
            """
            attempt("items", () => fetch(proxy + "/api/v1/items"));
            play("video", proxy + "/http/127.0.0.1:\(h.origin.port)/index.m3u8");
            """, proxy: h.base)
        let pages = TestOrigin(root: pagesRoot)
        pages.setBody(Array(hostile.utf8), contentType: "text/html; charset=utf-8", for: "/hostile.html")
        pages.setBody(Array(local.utf8), contentType: "text/html; charset=utf-8", for: "/local.html")
        try await pages.start()
        defer { Task { await pages.stop() } }

        func reports() -> [String: String] {
            var found: [String: String] = [:]
            for request in pages.requests(containing: "/report?") {
                let query = request.path.split(separator: "?", maxSplits: 1)[1]
                let pair = query.split(separator: "=", maxSplits: 1)
                found[String(pair[0])] = pair.count > 1 ? String(pair[1]).removingPercentEncoding : ""
            }
            return found
        }

        // The hostile page first, then (its reports cleared) the local one.
        let hostileResults = try await Self.browse("http://evil.test:\(pages.port)/hostile.html", h: h, progress: { "\(reports())" }) {
            let found = reports()
            return ["key", "items", "lockjson", "nocors", "form", "video"].allSatisfy { found[$0] != nil } ? found : nil
        }
        #expect(hostileResults["key"] == "blocked", "\(hostileResults)")
        #expect(hostileResults["items"] == "blocked", "\(hostileResults)")
        #expect(hostileResults["lockjson"] == "blocked", "\(hostileResults)")
        #expect(hostileResults["video"] == "error", "the key is refused, so the stream cannot be decrypted: \(hostileResults)")
        let target = try #require(try h.items.item("target"))
        #expect(!target.locked, "the form and the requests changed nothing")
        #expect(target.state != .paused)

        pages.clearLog()
        let localResults = try await Self.browse("http://localhost:\(pages.port)/local.html", h: h, progress: { "\(reports())" }) {
            let found = reports()
            return found["items"] != nil && found["video"] != nil ? found : nil
        }
        #expect(localResults["video"] == "played", "\(localResults)")
        #expect(localResults["items"]?.hasPrefix("read-200-") == true, "\(localResults)")
        await pages.stop()
        await h.shutdown()
    }

    /// Issue 31's tolerances as a browser meets them: Chromium 156's own HLS refuses a decimal BANDWIDTH or
    /// TARGETDURATION and a media playlist carrying EXT-X-SESSION-KEY even from the origin (DEMUXER_ERROR_COULD_NOT_PARSE),
    /// and the proxy keeps those bytes as written; a dangling #EXTINF at the end it plays, through the proxy too.
    @Test(
        "Chromium's native HLS plays through the proxy a stream ending with a dangling #EXTINF, as it does from the origin",
        .enabled(if: Chromium.path != nil, "chromium is not installed (apt-get install chromium, or make test-deps)"))
    func chromiumPlaysAToleratedStream() async throws {
        let made = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-tolerated-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: made, to: dir)
        defer { try? FileManager.default.removeItem(at: dir) }
        for variant in ["v0", "v1", "venglish"] {
            let url = dir.appendingPathComponent("\(variant)/index.m3u8")
            guard let media = try? String(contentsOf: url, encoding: .utf8) else { continue }
            try media.replacingOccurrences(of: "#EXT-X-ENDLIST", with: "#EXTINF:2.0,\n#EXT-X-ENDLIST").write(
                to: url, atomically: true, encoding: .utf8)
        }
        let h = try await AdminHarness(root: dir)
        defer { h.shutdownLater() }
        let proxied = try await h.request(.GET, h.proxyURL("/v0/index.m3u8"))
        #expect(proxied.status == 200 && proxied.text.hasSuffix("#EXTINF:2.0,\n#EXT-X-ENDLIST\n"), "\(proxied.text.suffix(300))")

        let pagesRoot = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-pages-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: pagesRoot, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: pagesRoot) }
        let pages = TestOrigin(root: pagesRoot)
        pages.setBody(
            Array(Self.page(#"play("video", proxy + "/http/127.0.0.1:\#(h.origin.port)/master.m3u8");"#, proxy: h.base).utf8),
            contentType: "text/html; charset=utf-8", for: "/play.html")
        try await pages.start()
        defer { Task { await pages.stop() } }
        let result = try await Self.browse(
            "http://localhost:\(pages.port)/play.html", h: h, progress: { "\(pages.requests(containing: "/report?").map(\.path))" }
        ) { pages.requests(containing: "/report?video=").first.map(\.path) }
        #expect(result.hasSuffix("video=played"), "\(result)")
        await pages.stop()
        await h.shutdown()
    }

    /// Opens `url` in headless Chromium and waits until `done` returns a value (at most 120 s), then ends the browser.
    static func browse<T>(
        _ url: String, h: AdminHarness, progress: @escaping () -> String, until done: @escaping () throws -> T?
    ) async throws -> T {
        let chromium = try #require(Chromium.path)
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-chromium-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: profile) }
        let browser = ChildProcess()
        browser.executableURL = URL(fileURLWithPath: chromium)
        browser.arguments = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--mute-audio",
            "--autoplay-policy=no-user-gesture-required", "--host-resolver-rules=MAP evil.test 127.0.0.1",
            "--user-data-dir=\(profile.path)", url,
        ]
        let devNull = FileHandle(forWritingAtPath: "/dev/null")
        defer { try? devNull?.close() }
        browser.standardOutput = devNull
        browser.standardError = devNull
        try browser.run()
        let pid = browser.processIdentifier
        defer {
            browser.terminate()
            kill(-pid, SIGKILL)
        }
        let result: T
        do {
            result = try await h.eventually("the page's reports from \(url)", timeout: .seconds(120)) { try done() }
        } catch {
            throw TestFailure(description: "\(error); reported so far: \(progress())")
        }
        browser.terminate()
        await browser.waitForExit()
        return result
    }
}
