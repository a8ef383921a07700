/// The console's script (inline in the page, allowed by its hash in the page's `Content-Security-Policy`).
///
/// It keeps the items in a `Map` and one table row per item; changes (the first load, events, answers to actions)
/// mark items dirty and the rows are redrawn at most a few hundred per animation frame, so thousands of items and
/// bursts of progress events never block the page. Everything an item carries is written with `textContent`.
enum ConsoleScript {
    static let source = #"""

        "use strict";
        const $ = id => document.getElementById(id);
        const API = "/api/v1";
        const PAGE = 500;
        const STATES = ["queued", "ready", "downloading", "paused", "idle", "cached", "partiallyCached", "evicted", "failed", "expired", "deleted"];
        const PAUSABLE = new Set(["queued", "downloading", "idle"]);
        const RESUMABLE = new Set(["ready", "paused", "idle", "failed", "cached", "partiallyCached", "evicted", "deleted"]);
        const LOCKABLE = item => item.state !== "deleted" && item.state !== "expired";
        const SVGNS = "http://www.w3.org/2000/svg";
        const STATE_CLASS = {cached: "st-good", partiallyCached: "st-good", queued: "st-busy", downloading: "st-busy", ready: "st-wait", paused: "st-wait",
          idle: "st-wait", failed: "st-bad", expired: "st-bad", evicted: "st-bad", deleted: "st-gone"};

        // The token lives in this tab only. An old link of the status page (`/#token=…`) still works: the token moves to
        // sessionStorage and leaves the address bar.
        let token = sessionStorage.getItem("hlscache.token") || "";
        {
          const match = location.hash.match(/token=([^&]+)/);
          if (match) {
            token = decodeURIComponent(match[1]);
            sessionStorage.setItem("hlscache.token", token);
            history.replaceState(null, "", location.pathname);
          }
        }

        class Unauthorized extends Error {}

        async function call(method, path, body) {
          const headers = {};
          if (token) headers.Authorization = "Bearer " + token;
          // The API's CSRF rule: every change says application/json, with a body or without.
          if (method !== "GET") headers["Content-Type"] = "application/json";
          const answer = await fetch(API + path, {method, headers, cache: "no-store", body: body === undefined ? undefined : JSON.stringify(body)});
          if (answer.status === 401) { askToken(); throw new Unauthorized("the API needs the token"); }
          const text = await answer.text();
          let data = null;
          try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
          if (!answer.ok) throw new Error((data && data.message) || method + " " + path + ": HTTP " + answer.status);
          return data;
        }

        // ---- Formatting

        function size(n) {
          const units = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; n = Number(n) || 0;
          while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
          return (i ? n.toFixed(1) : String(n)) + " " + units[i];
        }
        const percent = ratio => (ratio * 100).toFixed(ratio > 0 && ratio < 0.1 ? 1 : 0) + "%";
        function when(iso) {
          if (!iso) return "–";
          const date = new Date(iso);
          return date.toLocaleDateString() === new Date().toLocaleDateString() ? date.toLocaleTimeString() : date.toLocaleString();
        }
        let messageTimer = 0;
        function say(text, error) {
          const message = $("message");
          message.textContent = text; message.className = "message" + (error ? " error" : "");
          clearTimeout(messageTimer);
          messageTimer = setTimeout(() => { message.textContent = ""; }, 8000);
        }

        // ---- Items: a Map, one row each, redrawn in batches

        const items = new Map();
        const rows = new Map();
        const dirty = new Set();
        let frame = 0;
        let filterText = "";

        function schedule() {
          if (frame) return;
          // Hidden tabs get no animation frames; a timer keeps their rows current.
          frame = document.hidden ? setTimeout(flush, 100) : requestAnimationFrame(flush);
        }
        function touch(id) { dirty.add(id); schedule(); }
        function flush() {
          frame = 0;
          let done = 0;
          for (const id of dirty) {
            dirty.delete(id);
            draw(id);
            if (++done >= 300) break;
          }
          if (dirty.size) schedule();
          $("item-count").textContent = items.size ? "(" + items.size + ")" : "";
          $("empty").hidden = items.size > 0;
        }
        function upsert(item) { items.set(item.id, Object.assign(items.get(item.id) || {}, item)); touch(item.id); }
        function forget(id) {
          items.delete(id); dirty.delete(id);
          const row = rows.get(id); if (row) row.remove();
          rows.delete(id);
          $("item-count").textContent = items.size ? "(" + items.size + ")" : "";
          $("empty").hidden = items.size > 0;
        }

        function element(tag, className, parent) {
          const node = document.createElement(tag);
          if (className) node.className = className;
          if (parent) parent.appendChild(node);
          return node;
        }
        function makeRow(id) {
          const row = element("tr", "item");
          row.dataset.id = id;
          const first = element("td", "item", row);
          element("div", "name", first); element("div", "url", first); element("div", "tags", first);
          const state = element("td", "state", row);
          element("span", "badge", state); element("span", "lock", state); element("span", "why", state);
          const progress = element("td", "progress", row);
          element("span", "", element("span", "bar", progress)); element("span", "pct", progress);
          element("td", "size", row); element("td", "expires", row); element("td", "played", row);
          const actions = element("td", "actions", row);
          for (const [action, label] of [["play", "Play"], ["pause", "Pause"], ["resume", "Resume"], ["lock", "Lock"], ["unlock", "Unlock"], ["delete", "Delete"]]) {
            const button = element("button", "", actions);
            button.type = "button"; button.dataset.action = action; button.textContent = label;
          }
          $("items").appendChild(row);
          rows.set(id, row);
          return row;
        }
        function matches(item) {
          if (!filterText) return true;
          const text = [item.id, item.title || "", item.url, item.state, ...(item.tags || [])].join(" ").toLowerCase();
          return filterText.split(/\s+/).every(word => text.includes(word));
        }
        function draw(id) {
          const item = items.get(id);
          if (!item) return;
          const row = rows.get(id) || makeRow(id);
          row.hidden = !matches(item);
          row.querySelector(".name").textContent = item.title ? item.title + " (" + item.id + ")" : item.id;
          const url = row.querySelector(".url"); url.textContent = item.url; url.title = item.url;
          const tags = row.querySelector(".tags");
          tags.replaceChildren(...(item.tags || []).map(tag => { const chip = element("span", "tag"); chip.textContent = tag; return chip; }));
          const badge = row.querySelector(".badge");
          badge.textContent = item.state; badge.className = "badge " + item.state;
          row.dataset.state = item.state;
          row.querySelector(".lock").textContent = item.locked ? "locked" : "";
          row.querySelector(".why").textContent = item.error ? item.error + (item.message ? ": " + item.message : "") : "";
          const pct = Number(item.percent) || 0;
          row.querySelector(".bar>span").style.width = pct + "%";
          row.querySelector(".pct").textContent = pct.toFixed(1) + "%";
          row.querySelector(".size").textContent = size(item.bytesDone) + (item.bytesTotal ? " / " + size(item.bytesTotal) : "");
          row.querySelector(".expires").textContent = item.expiresAt ? when(item.expiresAt) : "never";
          row.querySelector(".played").textContent = item.consumption ? when(item.consumption.lastPlayedAt) + " (" + Math.round(item.consumption.servedSeconds) + " s)" : "–";
          const show = (action, visible) => { row.querySelector('[data-action="' + action + '"]').hidden = !visible; };
          show("play", Boolean(item.proxyPath) && item.state !== "deleted");
          show("pause", PAUSABLE.has(item.state));
          show("resume", RESUMABLE.has(item.state));
          show("lock", !item.locked && LOCKABLE(item));
          show("unlock", item.locked && LOCKABLE(item));
        }

        // Pages of the list (`limit`, then the cursor the answer names, when the server pages), appended as they come.
        async function loadItems() {
          const seen = new Set();
          let path = "/items?limit=" + PAGE;
          for (let pages = 0; path && pages < 10000; pages++) {
            const body = await call("GET", path);
            for (const item of body.items || []) { seen.add(item.id); upsert(item); }
            path = nextPage(body);
          }
          // After a reconnect: items removed meanwhile go too.
          for (const id of [...items.keys()]) if (!seen.has(id)) forget(id);
          flush();
        }
        function nextPage(body) {
          if (!body || !(body.items || []).length) return null;
          if (typeof body.next === "string") return body.next.startsWith(API) ? body.next.slice(API.length) : body.next;
          const cursor = body.nextCursor || body.cursor;
          if (typeof cursor === "string" && cursor) return "/items?limit=" + PAGE + "&cursor=" + encodeURIComponent(cursor);
          return null;
        }
        async function reload(id) {
          try { upsert(await call("GET", "/items/" + encodeURIComponent(id))); }
          catch (e) { if (String(e.message).includes("no such item") || String(e.message).includes("404")) forget(id); }
        }

        // ---- Live: Server-Sent Events

        let events = null;
        function listen() {
          if (events) events.close();
          let opened = false;
          events = new EventSource(API + "/events" + (token ? "?access_token=" + encodeURIComponent(token) : ""));
          const conn = $("conn");
          events.onopen = () => {
            conn.textContent = "live"; conn.className = "conn live";
            // Events carry changes only: after a reconnect the list is read again.
            if (opened) loadItems().catch(e => say(e.message, true));
            opened = true;
          };
          events.onerror = () => {
            conn.textContent = "reconnecting…"; conn.className = "conn";
            // A closed stream may be a token that no longer works: an API call tells (and asks for it on 401).
            if (events.readyState === EventSource.CLOSED) call("GET", "/stats").then(listen, () => {});
          };
          events.addEventListener("state", e => {
            const d = JSON.parse(e.data);
            const item = items.get(d.id);
            if (item) { item.state = d.state; if (d.error) item.error = d.error; else delete item.error; touch(d.id); }
            reload(d.id);
            statsSoon();
          });
          events.addEventListener("progress", e => {
            const d = JSON.parse(e.data);
            const item = items.get(d.id);
            if (!item) return reload(d.id);
            Object.assign(item, {bytesDone: d.bytes, bytesTotal: d.bytesTotal, segmentsDone: d.segments, segmentsTotal: d.segmentsTotal, percent: d.percent});
            touch(d.id);
          });
          events.addEventListener("removed", e => { forget(JSON.parse(e.data).id); statsSoon(); });
          events.addEventListener("played", e => reload(JSON.parse(e.data).id));
          events.addEventListener("evicted", e => { reload(JSON.parse(e.data).id); statsSoon(); });
        }

        // ---- Plots (SVG)

        function svg(tag, attributes, parent) {
          const node = document.createElementNS(SVGNS, tag);
          for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
          if (parent) parent.appendChild(node);
          return node;
        }
        function label(parent, x, y, text, anchor) {
          const node = svg("text", {x, y, "text-anchor": anchor || "start"}, parent);
          node.textContent = text;
          return node;
        }

        function drawTraffic(stats) {
          const plot = $("traffic-plot");
          plot.replaceChildren();
          const [W, H, left, right, top, bottom] = [360, 150, 58, 30, 8, 18];
          const width = W - left - right, height = H - top - bottom;
          const series = stats.traffic || [];
          const max = Math.max(1, ...series.map(s => s.bytesFromCache + s.bytesFromOrigin));
          const step = width / Math.max(1, series.length);
          svg("line", {x1: left, y1: top + height, x2: left + width, y2: top + height, class: "axis"}, plot);
          svg("line", {x1: left, y1: top, x2: left + width, y2: top, class: "axis"}, plot);
          label(plot, left - 4, top + 8, size(max), "end");
          label(plot, left - 4, top + height, "0", "end");
          label(plot, left + width + 3, top + 8, "100%");
          label(plot, left + width + 3, top + height, "0%");
          label(plot, left, H - 4, "−" + series.length + " min");
          label(plot, left + width, H - 4, "now", "end");
          let path = "";
          series.forEach((s, i) => {
            const x = left + i * step;
            const cache = s.bytesFromCache / max * height, origin = s.bytesFromOrigin / max * height;
            const start = new Date(s.start).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit"});
            const tip = start + ": " + size(s.bytesFromCache) + " from cache, " + size(s.bytesFromOrigin) + " from origin, hit ratio " + percent(s.hitRatio);
            if (s.bytesFromCache > 0) svg("rect", {x: x + 0.5, y: top + height - cache, width: Math.max(1, step - 1), height: cache, class: "cache"}, plot)
              .appendChild(svg("title", {})).textContent = tip;
            if (s.bytesFromOrigin > 0) svg("rect", {x: x + 0.5, y: top + height - cache - origin, width: Math.max(1, step - 1), height: origin, class: "origin"}, plot)
              .appendChild(svg("title", {})).textContent = tip;
            if (s.requestsFromCache + s.requestsFromOrigin > 0) {
              const cx = x + step / 2, cy = top + (1 - s.hitRatio) * height;
              path += (path && series[i - 1] && series[i - 1].requestsFromCache + series[i - 1].requestsFromOrigin > 0 ? " L" : " M") + cx.toFixed(1) + " " + cy.toFixed(1);
              svg("circle", {cx: cx.toFixed(1), cy: cy.toFixed(1), r: 1.6, class: "ratio-dot"}, plot);
            }
          });
          if (path) svg("path", {d: path.trim(), class: "ratio"}, plot);
          const hour = stats.lastHour;
          plot.dataset.bytesFromCache = hour.bytesFromCache;
          plot.dataset.bytesFromOrigin = hour.bytesFromOrigin;
          const requests = hour.requestsFromCache + hour.requestsFromOrigin;
          $("traffic-summary").textContent = requests
            ? size(hour.bytesFromCache) + " from cache, " + size(hour.bytesFromOrigin) + " from origin; hit ratio " + percent(hour.hitRatio) + " of " + requests + " requests"
            : "Nothing served through the proxy in the last hour.";
        }

        function drawDisk(stats) {
          const plot = $("disk-plot");
          plot.replaceChildren();
          const cache = stats.cache;
          const ratio = cache.maxBytes > 0 ? Math.min(1, cache.bytes / cache.maxBytes) : 0;
          svg("rect", {x: 0, y: 8, width: 360, height: 22, rx: 4, class: "track"}, plot);
          svg("rect", {x: 0, y: 8, width: (360 * ratio).toFixed(1), height: 22, rx: 4, class: "used" + (ratio >= 0.98 ? " full" : ratio >= 0.85 ? " high" : "")}, plot);
          label(plot, 0, 46, size(cache.bytes) + " used");
          label(plot, 360, 46, "cap " + size(cache.maxBytes), "end");
          plot.dataset.ratio = ratio.toFixed(4);
          $("disk-summary").textContent = percent(ratio) + " of the cap, " + cache.objects + " objects"
            + (cache.diskFreeBytes !== undefined ? "; " + size(cache.diskFreeBytes) + " free on the disk" : "");
        }

        function drawStates(stats) {
          const plot = $("states-plot");
          plot.replaceChildren();
          const counts = STATES.map(state => [state, (stats.items || {})[state] || 0]).filter(([, n]) => n > 0);
          const max = Math.max(1, ...counts.map(([, n]) => n));
          const rowHeight = Math.min(20, 150 / Math.max(1, counts.length));
          plot.setAttribute("viewBox", "0 0 360 " + Math.max(40, rowHeight * counts.length).toFixed(0));
          counts.forEach(([state, n], i) => {
            const y = i * rowHeight;
            label(plot, 0, y + rowHeight * 0.7, state);
            const bar = svg("rect", {x: 100, y: y + 3, width: Math.max(2, 220 * n / max).toFixed(1), height: rowHeight - 6, rx: 2, class: "state-bar"}, plot);
            bar.classList.add(STATE_CLASS[state] || "st-gone");
            bar.appendChild(svg("title", {})).textContent = n + " " + state;
            label(plot, 104 + 220 * n / max, y + rowHeight * 0.7, String(n));
          });
          if (!counts.length) label(plot, 0, 20, "No items.");
          const total = counts.reduce((sum, [, n]) => sum + n, 0);
          plot.dataset.total = total;
          $("states-summary").textContent = total + " items" + (counts.length ? ": " + counts.map(([s, n]) => n + " " + s).join(", ") : "");
        }

        async function refreshStats() {
          const stats = await call("GET", "/stats");
          drawTraffic(stats); drawDisk(stats); drawStates(stats);
        }
        let statsTimer = 0;
        function statsSoon() {
          if (statsTimer) return;
          statsTimer = setTimeout(() => { statsTimer = 0; refreshStats().catch(() => {}); }, 1000);
        }

        // ---- Actions

        $("items").addEventListener("click", async event => {
          const button = event.target.closest("button[data-action]");
          if (!button) return;
          const id = button.closest("tr").dataset.id;
          const action = button.dataset.action;
          if (action === "play") return preview(id);
          // Deleting asks once more on the same button (no dialog: it would block the page).
          if (action === "delete" && button.dataset.armed !== "1") {
            button.dataset.armed = "1"; button.textContent = "Really delete?";
            button.addEventListener("blur", () => { button.dataset.armed = ""; button.textContent = "Delete"; }, {once: true});
            return;
          }
          button.disabled = true;
          try {
            if (action === "delete") {
              await call("DELETE", "/items/" + encodeURIComponent(id));
              forget(id);
              if ($("preview").dataset.id === id) closePreview();
            } else {
              upsert(await call("POST", "/items/" + encodeURIComponent(id) + "/" + action));
            }
            say(action + " " + id + ": done");
            statsSoon();
          } catch (e) {
            if (!(e instanceof Unauthorized)) say(action + " " + id + ": " + e.message, true);
          } finally {
            button.disabled = false;
            if (action === "delete") { button.dataset.armed = ""; button.textContent = "Delete"; }
          }
        });

        $("add-form").addEventListener("submit", async event => {
          event.preventDefault();
          const body = {url: $("add-url").value.trim()};
          const seconds = $("add-seconds").value;
          if (seconds !== "") body.seconds = Number(seconds);
          if ($("add-variants").value !== "all") body.variants = $("add-variants").value;
          const expires = $("add-expires").value.trim();
          if (expires) body.expires = /^\d+$/.test(expires) ? Number(expires) : expires;
          const tags = $("add-tags").value.split(",").map(tag => tag.trim()).filter(Boolean);
          if (tags.length) body.tags = tags;
          const id = $("add-id").value.trim();
          if (id) body.id = id;
          $("add-submit").disabled = true;
          try {
            const item = await call("POST", "/items", body);
            upsert(item);
            say("added " + item.id);
            $("add-form").reset();
          } catch (e) {
            if (!(e instanceof Unauthorized)) say("add: " + e.message, true);
          } finally {
            $("add-submit").disabled = false;
          }
        });

        $("filter").addEventListener("input", () => {
          filterText = $("filter").value.trim().toLowerCase();
          for (const id of items.keys()) dirty.add(id);
          schedule();
        });

        // ---- Preview: the browser's own HLS playback of the item's proxy URL

        const player = $("player");
        function preview(id) {
          const item = items.get(id);
          if (!item || !item.proxyPath) return;
          $("preview").hidden = false;
          $("preview").dataset.id = id;
          $("preview-id").textContent = item.title || id;
          $("preview-state").textContent = "loading…";
          player.src = item.proxyPath;
          player.play().catch(e => { $("preview-state").textContent = "press play (" + e.name + ")"; });
          $("preview").scrollIntoView({block: "nearest"});
        }
        function closePreview() {
          player.pause(); player.removeAttribute("src"); player.load();
          $("preview").hidden = true; delete $("preview").dataset.id;
        }
        player.addEventListener("timeupdate", () => { $("preview-time").textContent = player.currentTime.toFixed(1); });
        player.addEventListener("playing", () => { $("preview-state").textContent = "playing"; });
        player.addEventListener("pause", () => { $("preview-state").textContent = "paused"; });
        player.addEventListener("error", () => {
          if (player.getAttribute("src")) $("preview-state").textContent = "cannot play: " + (player.error ? player.error.message || "code " + player.error.code : "error");
        });
        $("preview-close").addEventListener("click", closePreview);

        // ---- Token

        function askToken() {
          if (events) { events.close(); events = null; }
          const wasSet = Boolean(token);
          token = ""; sessionStorage.removeItem("hlscache.token");
          $("console").hidden = true;
          $("forget-token").hidden = true;
          $("token-form").hidden = false;
          $("token-error").textContent = wasSet ? "The server refused that token." : "";
          $("conn").textContent = "token needed"; $("conn").className = "conn";
          $("token-input").focus();
        }
        $("token-form").addEventListener("submit", event => {
          event.preventDefault();
          token = $("token-input").value.trim();
          $("token-input").value = "";
          sessionStorage.setItem("hlscache.token", token);
          start();
        });
        $("forget-token").addEventListener("click", () => { askToken(); $("token-error").textContent = ""; });

        let statsInterval = 0;
        async function start() {
          try {
            await refreshStats();
          } catch (e) {
            if (!(e instanceof Unauthorized)) say(e.message, true);
            return;
          }
          $("token-form").hidden = true;
          $("console").hidden = false;
          $("forget-token").hidden = !token;
          listen();
          loadItems().catch(e => { if (!(e instanceof Unauthorized)) say(e.message, true); });
          if (!statsInterval) statsInterval = setInterval(() => { if (!$("console").hidden) refreshStats().catch(() => {}); }, 5000);
        }
        start();

        """#
}
