// The console's script, inline in the page (ConsolePage.swift) and allowed by its hash in the page's
// Content-Security-Policy. It keeps the items in a `Map` and one table row per item; changes (the first load, events,
// answers to actions) mark items dirty and the rows are redrawn at most a few hundred per animation frame, so
// thousands of items and bursts of progress events never block the page. Everything an item carries is written
// with `textContent`.
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
  if (!answer.ok) {
    const error = new Error((data && data.message) || method + " " + path + ": HTTP " + answer.status);
    error.status = answer.status;
    throw error;
  }
  return data;
}

// ---- Formatting

function size(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"]; let i = 0; n = Number(n) || 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}
const percent = ratio => (ratio * 100).toFixed(ratio > 0 && ratio < 0.1 ? 1 : 0) + "%";
const dayFormat = new Intl.DateTimeFormat(undefined, {dateStyle: "short"});
const timeFormat = new Intl.DateTimeFormat(undefined, {timeStyle: "medium"});
const dateTimeFormat = new Intl.DateTimeFormat(undefined, {dateStyle: "short", timeStyle: "short"});
function when(iso) {
  if (!iso) return "–";
  const date = new Date(iso);
  return dayFormat.format(date) === dayFormat.format(new Date()) ? timeFormat.format(date) : dateTimeFormat.format(date);
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
// Ids in the list's order (the API's: oldest first; new ones last).
const order = [];
// Rows exist for the shown page only: the table never holds more than ROWS rows, however many items.
const ROWS = 100;
const rows = new Map();
const dirty = new Set();
let frame = 0;
let filterText = "";
let viewDirty = true;
let pageStart = 0;
let shownTotal = 0;

function schedule() {
  if (frame) return;
  // Hidden tabs get no animation frames; a timer keeps their rows current.
  frame = document.hidden ? setTimeout(flush, 100) : requestAnimationFrame(flush);
}
function touch(id) { dirty.add(id); schedule(); }
function refreshView() { viewDirty = true; schedule(); }
function flush() {
  frame = 0;
  if (viewDirty) { viewDirty = false; dirty.clear(); buildView(); }
  for (const id of dirty) if (rows.has(id)) draw(id);
  dirty.clear();
  $("item-count").textContent = items.size ? "(" + items.size + ")" : "";
  $("empty").hidden = items.size > 0;
}
// The page of the (filtered) list that is shown: ROWS rows from pageStart.
function buildView() {
  const ids = filterText ? order.filter(id => matches(items.get(id))) : order;
  shownTotal = ids.length;
  if (pageStart >= shownTotal) pageStart = Math.max(0, Math.floor((shownTotal - 1) / ROWS) * ROWS);
  const page = ids.slice(pageStart, pageStart + ROWS);
  const shown = new Set(page);
  for (const id of [...rows.keys()]) if (!shown.has(id)) rows.delete(id);
  $("items").replaceChildren(...page.map(id => { const row = rows.get(id) || makeRow(id); draw(id); return row; }));
  $("pager").hidden = shownTotal <= ROWS;
  $("page-info").textContent = shownTotal ? (pageStart + 1) + "–" + (pageStart + page.length) + " of " + shownTotal : "none";
  $("page-first").disabled = $("page-prev").disabled = pageStart === 0;
  $("page-next").disabled = $("page-last").disabled = pageStart + ROWS >= shownTotal;
}
function upsert(item) {
  const known = items.get(item.id);
  if (!known) order.push(item.id);
  const merged = Object.assign(known || {}, item);
  items.set(item.id, merged);
  // A new item, or any change while a filter is on, can change what the page shows.
  if (!known || filterText) refreshView(); else touch(item.id);
}
// Removals are numbered: an answer to a request sent before an item's removal (a page of the list, a reload)
// must not bring the item back.
let removals = 0;
const gone = new Map();
function stale(id, since) { const at = gone.get(id); return at !== undefined && at > since; }
function forget(id) {
  gone.set(id, ++removals);
  if (!items.delete(id)) return;
  const at = order.indexOf(id);
  if (at >= 0) order.splice(at, 1);
  refreshView();
}
for (const [button, move] of [["page-first", () => 0], ["page-prev", () => pageStart - ROWS], ["page-next", () => pageStart + ROWS],
                              ["page-last", () => Math.floor((shownTotal - 1) / ROWS) * ROWS]]) {
  $(button).addEventListener("click", () => { pageStart = Math.max(0, move()); refreshView(); });
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
  // The cells a redraw touches, kept on the row so a redraw looks nothing up.
  const parts = {};
  const first = element("td", "item", row);
  parts.poster = element("img", "poster", first);
  parts.poster.alt = ""; parts.poster.loading = "lazy"; parts.poster.hidden = true;
  parts.name = element("div", "name", first); parts.url = element("div", "url", first); parts.tags = element("div", "tags", first);
  const state = element("td", "state", row);
  parts.badge = element("span", "badge", state); parts.lock = element("span", "lock", state); parts.why = element("span", "why", state);
  const progress = element("td", "progress", row);
  parts.bar = element("span", "", element("span", "bar", progress)); parts.pct = element("span", "pct", progress);
  parts.speed = element("span", "speed", progress);
  parts.size = element("td", "size", row); parts.expires = element("td", "expires", row); parts.played = element("td", "played", row);
  const actions = element("td", "actions", row);
  parts.buttons = {};
  for (const [action, label] of [["play", "Play"], ["pause", "Pause"], ["resume", "Resume"], ["lock", "Lock"], ["unlock", "Unlock"], ["delete", "Delete"]]) {
    const button = parts.buttons[action] = element("button", "", actions);
    button.type = "button"; button.dataset.action = action; button.textContent = label;
  }
  row.parts = parts;
  rows.set(id, row);
  return row;
}
function matches(item) {
  if (!filterText) return true;
  const text = [item.id, item.title || "", item.url, item.state, ...(item.tags || [])].join(" ").toLowerCase();
  return filterText.split(/\s+/).every(word => text.includes(word));
}
// Only what changed is written, so a progress event costs a few comparisons and one or two text nodes.
function text(node, value) { if (node.textContent !== value) node.textContent = value; }
function draw(id) {
  const item = items.get(id);
  if (!item) return;
  const row = rows.get(id) || makeRow(id);
  const parts = row.parts;
  text(parts.name, item.title ? item.title + " (" + item.id + ")" : item.id);
  if (parts.url.title !== item.url) { parts.url.textContent = item.url; parts.url.title = item.url; }
  // Through the proxy (`posterPath`), never from the origin: the page loads nothing from elsewhere.
  if (item.posterPath && parts.poster.getAttribute("src") !== item.posterPath) parts.poster.src = item.posterPath;
  parts.poster.hidden = !item.posterPath;
  const tags = (item.tags || []).join("\n");
  if (parts.tags.dataset.tags !== tags) {
    parts.tags.dataset.tags = tags;
    parts.tags.replaceChildren(...(item.tags || []).map(tag => { const chip = element("span", "tag"); chip.textContent = tag; return chip; }));
  }
  if (row.dataset.state !== item.state) {
    row.dataset.state = item.state;
    parts.badge.textContent = item.state; parts.badge.className = "badge " + item.state;
  }
  text(parts.lock, item.locked ? "locked" : "");
  text(parts.why, item.error ? item.error + (item.message ? ": " + item.message : "") : "");
  const pct = Number(item.percent) || 0;
  if (parts.bar.style.width !== pct + "%") parts.bar.style.width = pct + "%";
  text(parts.pct, pct.toFixed(1) + "%");
  // The server's moving average (bytesPerSecond, etaSeconds): shown while the item downloads and the speed is known.
  const downloading = item.state === "downloading" && typeof item.bytesPerSecond === "number";
  text(parts.speed, downloading
    ? size(item.bytesPerSecond) + "/s" + (typeof item.etaSeconds === "number" ? ", " + item.etaSeconds + " s left" : "")
    : "");
  text(parts.size, size(item.bytesDone) + (item.bytesTotal ? " / " + size(item.bytesTotal) : ""));
  text(parts.expires, item.expiresAt ? when(item.expiresAt) : "never");
  text(parts.played, item.consumption ? when(item.consumption.lastPlayedAt) + " (" + Math.round(item.consumption.servedSeconds) + " s)" : "–");
  const show = (action, visible) => { if (parts.buttons[action].hidden === visible) parts.buttons[action].hidden = !visible; };
  show("play", Boolean(item.proxyPath) && item.state !== "deleted");
  show("pause", PAUSABLE.has(item.state));
  show("resume", RESUMABLE.has(item.state));
  show("lock", !item.locked && LOCKABLE(item));
  show("unlock", item.locked && LOCKABLE(item));
}

// Pages of the list (`limit`, then `after=nextCursor` while the server says more follow), drawn as they come. A
// cursor, not an offset: items added or removed while the pages are read neither shift a page nor hide an item.
async function loadItems() {
  const seen = new Set();
  let path = "/items?limit=" + PAGE;
  let total = null;
  for (let pages = 0; path && pages < 100000; pages++) {
    const since = removals;
    const body = await call("GET", path);
    for (const item of body.items || []) { seen.add(item.id); if (!stale(item.id, since)) upsert(item); }
    if (typeof body.total === "number") total = body.total;
    path = nextPage(body);
  }
  // After a reconnect: items removed meanwhile go too (unless items were added meanwhile and the count is off).
  if (total === null || seen.size >= total) for (const id of [...items.keys()]) if (!seen.has(id)) forget(id);
  flush();
}
function nextPage(body) {
  if (!body || !(body.items || []).length) return null;
  if (typeof body.nextCursor === "string") return "/items?limit=" + PAGE + "&after=" + encodeURIComponent(body.nextCursor);
  if (typeof body.nextOffset === "number") return "/items?limit=" + PAGE + "&offset=" + body.nextOffset;
  return null;
}
// Items an event named, read again two at a time: a burst of events (a script adding hundreds of items) must
// not queue hundreds of requests in front of the page's other ones. Past 100 waiting, the list is read again
// instead, once.
const toReload = new Set();
let reloading = 0;
let listing = null, listAgain = false;
function reload(id) {
  toReload.add(id);
  if (toReload.size > 100) { toReload.clear(); reloadList(); return; }
  pump();
}
function pump() {
  while (reloading < 2 && toReload.size) {
    const id = toReload.values().next().value;
    toReload.delete(id);
    reloading++;
    const since = removals;
    call("GET", "/items/" + encodeURIComponent(id))
      .then(item => { if (!stale(id, since)) upsert(item); }, e => { if (e.status === 404) forget(id); })
      .finally(() => { reloading--; pump(); });
  }
}
function reloadList() {
  if (listing) { listAgain = true; return; }
  listing = loadItems().catch(e => { if (!(e instanceof Unauthorized)) say(e.message, true); }).finally(() => {
    listing = null;
    if (listAgain) { listAgain = false; reloadList(); }
  });
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
    if (opened) reloadList();
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
    if (item) { item.state = d.state; if (d.error) item.error = d.error; else delete item.error; if (filterText) refreshView(); else touch(d.id); }
    reload(d.id);
    statsSoon();
  });
  events.addEventListener("progress", e => {
    const d = JSON.parse(e.data);
    const item = items.get(d.id);
    if (!item) return reload(d.id);
    Object.assign(item, {bytesDone: d.bytes, bytesTotal: d.bytesTotal, segmentsDone: d.segments, segmentsTotal: d.segmentsTotal, percent: d.percent,
      bytesPerSecond: d.bytesPerSecond, etaSeconds: d.etaSeconds});
    touch(d.id);
  });
  events.addEventListener("removed", e => { forget(JSON.parse(e.data).id); statsSoon(); });
  // Locked or unlocked here or elsewhere (another console, the CLI): the buttons follow at once.
  events.addEventListener("lock", e => {
    const d = JSON.parse(e.data);
    const item = items.get(d.id);
    if (!item) return reload(d.id);
    item.locked = d.locked === true;
    touch(d.id);
  });
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
  const title = $("add-title").value.trim();
  if (title) body.title = title;
  const tags = $("add-tags").value.split(",").map(tag => tag.trim()).filter(Boolean);
  if (tags.length) body.tags = tags;
  const id = $("add-id").value.trim();
  if (id) body.id = id;
  $("add-submit").disabled = true;
  try {
    const item = await call("POST", "/items", body);
    upsert(item);
    // Shown where it is: the last page, unless a filter hides it.
    if (!filterText) { pageStart = Math.floor(order.indexOf(item.id) / ROWS) * ROWS; refreshView(); }
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
  pageStart = 0;
  refreshView();
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
  reloadList();
  if (!statsInterval) statsInterval = setInterval(() => { if (!$("console").hidden) refreshStats().catch(() => {}); }, 5000);
}
start();
