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
        "default-src 'none'; script-src '\(hash(script))'; style-src '\(hash(style))'; "
        + "connect-src 'self'; media-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func hash(_ text: String) -> String {
        "sha256-" + Data(SHA256.digest(text)).base64EncodedString()
    }

    /// The script and the style sheet: `Console/Resources/console.js` and `console.css`, built into the binary
    /// (`.embedInCode` in Package.swift), so editors and `node --check` (make lint) see them as what they are.
    static let script = String(decoding: PackageResources.console_js, as: UTF8.self)
    static let style = String(decoding: PackageResources.console_css, as: UTF8.self)

    /// `Console/Resources/console.html` with the version, the style sheet and the script put into its empty
    /// `<span id="version">`, `<style>` and `<script>` elements.
    static let html = String(decoding: PackageResources.console_html, as: UTF8.self)
        .filling("<span id=\"version\">", with: HLSCacheVersion.current, before: "</span>")
        .filling("<style>", with: style, before: "</style>")
        .filling("<script>", with: script, before: "</script>")

    static let page: [UInt8] = Array(html.utf8)
}

extension String {
    /// This page with `content` between `open` and `close`, which must occur once, adjacent (an empty element).
    fileprivate func filling(_ open: String, with content: String, before close: String) -> String {
        let element = open + close
        precondition(components(separatedBy: element).count == 2, "console.html must have exactly one empty \(element)")
        return replacingOccurrences(of: element, with: open + content + close)
    }
}
