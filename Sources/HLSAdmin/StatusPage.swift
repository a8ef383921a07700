import Foundation
import HLSCacheCore
import HLSProxy
import NIOCore
import NIOHTTP1

/// `GET /`: one self-contained HTML page (no external assets) listing the items with their state, progress, size,
/// expiry and last playback, and the cache usage and hit ratio. Its script reads `/api/v1/items` and
/// `/api/v1/status`, then follows `/api/v1/events`. With `api.token` set, open it as `/#token=…`.
enum StatusPage {
    /// - Parameter initialItems: the `GET /api/v1/items` body to render before any request (embedded as JSON).
    static func send(to responder: ProxyResponder, headOnly: Bool, initialItems: String? = nil) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
        headers.add(name: "Cache-Control", value: "no-store")
        // Inline script and style only; nothing is loaded from elsewhere.
        headers.add(
            name: "Content-Security-Policy",
            value: "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
        headers.add(name: "X-Frame-Options", value: "DENY")
        // `<` is escaped so no item field can close the script element.
        let snapshot = (initialItems ?? "null").replacingOccurrences(of: "<", with: "\\u003c")
        responder.send(status: .ok, headers: headers, body: ByteBuffer(string: html.replacingOccurrences(of: "/*INITIAL*/null", with: snapshot)))
    }

    static let html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>hlscache</title>
        <style>
        body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
        h1{font-size:1.3em;margin:0 0 .3em}
        #summary{color:#555;margin-bottom:1em}
        table{border-collapse:collapse;width:100%}
        th,td{text-align:left;padding:.35em .6em;border-bottom:1px solid #ddd;vertical-align:middle}
        th{font-weight:600;background:#f5f5f5}
        .bar{width:10em;height:.8em;background:#eee;border-radius:.4em;overflow:hidden;display:inline-block;vertical-align:middle}
        .bar>div{height:100%;background:#3a7;width:0}
        .state-failed{color:#b22}.state-downloading{color:#27a}.state-paused{color:#a70}.state-evicted{color:#a70}
        .url{max-width:28em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;color:#555}
        #conn{font-size:.85em;color:#888}
        </style></head>
        <body>
        <h1>hlscache <span id="version">\(HLSCacheVersion.current)</span></h1>
        <div id="summary">Cache: <span id="cache">…</span> · Hit ratio: <span id="hits">…</span> · <span id="conn">connecting…</span></div>
        <table><thead><tr><th>Item</th><th>State</th><th>Progress</th><th>Size</th><th>Expires</th><th>Last played</th><th>URL</th></tr></thead>
        <tbody id="items"><tr id="empty"><td colspan="7">No items yet (hlscache fetch URL, or POST /api/v1/items).</td></tr></tbody></table>
        <script>
        "use strict";
        const token = (location.hash.match(/token=([^&]+)/) || [])[1];
        const headers = token ? {Authorization: "Bearer " + decodeURIComponent(token)} : {};
        const items = new Map();
        function size(n) {
          const units = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; n = Number(n) || 0;
          while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
          return (i ? n.toFixed(1) : n) + " " + units[i];
        }
        function when(iso) { return iso ? new Date(iso).toLocaleString() : "–"; }
        function cell(row, cls) { let c = row.querySelector("." + cls); if (!c) { c = document.createElement("td"); c.className = cls; row.appendChild(c); } return c; }
        function render(item) {
          let row = document.getElementById("item-" + item.id);
          if (!row) {
            row = document.createElement("tr"); row.id = "item-" + item.id; row.className = "item";
            ["id", "state", "progress", "size", "expires", "played", "url"].forEach(c => cell(row, c));
            cell(row, "progress").innerHTML = '<span class="bar"><div></div></span> <span class="pct"></span>';
            document.getElementById("items").appendChild(row);
          }
          const empty = document.getElementById("empty"); if (empty) empty.remove();
          cell(row, "id").textContent = item.id;
          const state = cell(row, "state"); state.textContent = item.state + (item.error ? " (" + item.error + ")" : "") + (item.locked ? " 🔒" : "");
          state.className = "state state-" + item.state;
          const pct = Number(item.percent) || 0;
          row.querySelector(".bar>div").style.width = pct + "%";
          row.querySelector(".pct").textContent = pct.toFixed(1) + "%";
          cell(row, "size").textContent = size(item.bytesDone) + " / " + size(item.bytesTotal);
          cell(row, "expires").textContent = when(item.expiresAt);
          cell(row, "played").textContent = item.consumption ? when(item.consumption.lastPlayedAt) + " (" + item.consumption.servedSeconds.toFixed(0) + " s)" : "–";
          const url = cell(row, "url"); url.textContent = item.url; url.title = item.url;
        }
        async function get(path) { const r = await fetch(path, {headers}); if (!r.ok) throw new Error(path + ": " + r.status); return r.json(); }
        async function loadItems() { const body = await get("/api/v1/items"); body.items.forEach(i => { items.set(i.id, i); render(i); }); }
        async function loadItem(id) { try { const i = await get("/api/v1/items/" + encodeURIComponent(id)); items.set(id, i); render(i); } catch (e) {} }
        async function loadStatus() {
          const s = await get("/api/v1/status");
          document.getElementById("cache").textContent = size(s.cache.bytes) + " of " + size(s.cache.maxBytes) + " (" + s.cache.objects + " objects)";
          document.getElementById("hits").textContent = (s.requests.hitRatio * 100).toFixed(1) + "% of " + (s.requests.hits + s.requests.misses) + " requests";
        }
        function listen() {
          const es = new EventSource("/api/v1/events" + (token ? "?access_token=" + token : ""));
          const conn = document.getElementById("conn");
          es.onopen = () => { conn.textContent = "live"; };
          es.onerror = () => { conn.textContent = "reconnecting…"; };
          es.addEventListener("state", e => { const d = JSON.parse(e.data); const i = items.get(d.id);
            if (i) { i.state = d.state; i.error = d.error; render(i); } loadItem(d.id); });
          es.addEventListener("progress", e => { const d = JSON.parse(e.data); const i = items.get(d.id); if (!i) return loadItem(d.id);
            Object.assign(i, {bytesDone: d.bytes, bytesTotal: d.bytesTotal, segmentsDone: d.segments, segmentsTotal: d.segmentsTotal, percent: d.percent}); render(i); });
          es.addEventListener("removed", e => { const d = JSON.parse(e.data); items.delete(d.id); const r = document.getElementById("item-" + d.id); if (r) r.remove(); });
          es.addEventListener("played", e => { const d = JSON.parse(e.data); loadItem(d.id); });
          es.addEventListener("evicted", e => { const d = JSON.parse(e.data); loadItem(d.id); });
        }
        const initial = /*INITIAL*/null;
        if (initial) initial.items.forEach(i => { items.set(i.id, i); render(i); });
        loadItems().catch(e => { document.getElementById("conn").textContent = String(e); });
        loadStatus().catch(() => {});
        setInterval(() => loadStatus().catch(() => {}), 5000);
        listen();
        </script>
        </body></html>

        """
}
