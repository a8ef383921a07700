import Foundation
import HLSCacheCore
import HLSCrypto
import HLSProxy
import NIOCore
import NIOHTTP1

/// `GET /`: the console — one HTML page with its style and script inline, built into the binary (no build step,
/// nothing fetched from elsewhere). It reads and drives the admin API from the browser: items with live progress
/// over `/api/v1/events`, per-item actions, a form to add a stream, a preview player (the browser's own `<video>`
/// on the item's proxy URL) and plots from `/api/v1/stats`. See docs/api.md#console.
///
/// The page holds no data, so it needs no token itself; with `api.token` set its script asks for the token when the
/// API answers 401, keeps it in the tab's `sessionStorage` and sends it as `Authorization: Bearer`.
enum ConsolePage {
    static func send(to responder: ProxyResponder) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
        headers.add(name: "Cache-Control", value: "no-store")
        headers.add(name: "Content-Security-Policy", value: contentSecurityPolicy)
        headers.add(name: "X-Frame-Options", value: "DENY")
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        headers.add(name: "Referrer-Policy", value: "no-referrer")
        responder.send(status: .ok, headers: headers, body: ByteBuffer(bytes: page))
    }

    /// Only this page's own script and style run (by their SHA-256, so an injected `<script>` would not), and the
    /// page talks to its own server only: the API, and the proxy for the preview.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src '\(hash(ConsoleScript.source))'; style-src '\(hash(ConsoleStyle.source))'; "
        + "connect-src 'self'; media-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func hash(_ text: String) -> String {
        "sha256-" + Data(SHA256.digest(text)).base64EncodedString()
    }

    static let page: [UInt8] = Array(html.utf8)

    static let html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>hlscache console</title>
        <style>\(ConsoleStyle.source)</style></head>
        <body>
        <header>
        <h1>hlscache <span id="version">\(HLSCacheVersion.current)</span></h1>
        <span id="conn" class="conn">connecting…</span>
        <span id="message" class="message" role="status"></span>
        <button id="forget-token" type="button" hidden>Forget token</button>
        </header>
        <form id="token-form" class="card token" hidden>
        <h2>Token needed</h2>
        <p>This server has <code>api.token</code> set. Enter it to use the console; it stays in this browser tab only.</p>
        <input id="token-input" type="password" autocomplete="off" required placeholder="api.token" aria-label="token">
        <button type="submit" id="token-submit">Use token</button>
        <p id="token-error" class="error"></p>
        </form>
        <main id="console" hidden>
        <section class="plots">
        <div class="card"><h2>Traffic, last hour</h2>
        <svg id="traffic-plot" viewBox="0 0 360 150" role="img" aria-label="bytes served per minute from the cache and from the origin, and the hit ratio"></svg>
        <p class="legend"><span class="swatch cache"></span>from cache <span class="swatch origin"></span>from origin <span class="swatch ratio"></span>hit ratio</p>
        <p id="traffic-summary" class="summary">…</p></div>
        <div class="card"><h2>Disk</h2>
        <svg id="disk-plot" viewBox="0 0 360 56" role="img" aria-label="disk used against the cap"></svg>
        <p id="disk-summary" class="summary">…</p></div>
        <div class="card"><h2>Items by state</h2>
        <svg id="states-plot" viewBox="0 0 360 150" role="img" aria-label="items by state"></svg>
        <p id="states-summary" class="summary">…</p></div>
        </section>
        <section class="card">
        <h2>Add a stream</h2>
        <form id="add-form" class="add">
        <label class="wide">URL <input id="add-url" type="url" required placeholder="https://cdn.example.com/vod/master.m3u8"></label>
        <label>Seconds <input id="add-seconds" type="number" min="0" max="32767" placeholder="0 = all"></label>
        <label>Variants <select id="add-variants"><option value="all">all</option><option value="best">best</option><option value="worst">worst</option></select></label>
        <label>Expires <input id="add-expires" placeholder="7d, 12h (blank: never)"></label>
        <label>Title <input id="add-title" maxlength="200" placeholder="optional"></label>
        <label>Tags <input id="add-tags" placeholder="class-a, kiosk"></label>
        <label>Id <input id="add-id" placeholder="optional" pattern="[A-Za-z0-9._\\-]{1,64}"></label>
        <button type="submit" id="add-submit">Add</button>
        </form>
        </section>
        <section class="card" id="preview" hidden>
        <h2>Preview: <span id="preview-id"></span></h2>
        <video id="player" controls muted playsinline></video>
        <p class="summary"><span id="preview-time">0.0</span> s <span id="preview-state"></span>
        <button type="button" id="preview-close">Close</button></p>
        </section>
        <section class="card">
        <div class="toolbar"><h2>Items <span id="item-count"></span></h2>
        <input id="filter" type="search" placeholder="filter: id, URL, state, tag" aria-label="filter"></div>
        <table><thead><tr><th>Item</th><th>State</th><th>Progress</th><th>Size</th><th>Expires</th><th>Last played</th><th>Actions</th></tr></thead>
        <tbody id="items"></tbody></table>
        <p id="pager" class="pager" hidden><button type="button" id="page-first">First</button> <button type="button" id="page-prev">Previous</button>
        <span id="page-info"></span> <button type="button" id="page-next">Next</button> <button type="button" id="page-last">Last</button></p>
        <p id="empty" class="summary" hidden>No items yet: add a stream above, or run <code>hlscache fetch URL</code>.</p>
        </section>
        </main>
        <script>\(ConsoleScript.source)</script>
        </body></html>

        """
}
