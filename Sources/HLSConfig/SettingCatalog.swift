import Foundation
import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSProxy

/// Every setting hlscache knows, in the order of Config/hlscache.yaml and docs/configuration.md. `origins`
/// (per-origin headers and cookies) is a mapping read by ``OriginsSection`` and is not listed here.
package enum SettingCatalog {
    /// The top-level key of the per-origin section.
    package static let originsKey = "origins"

    package static var all: [SettingKey] {
        [
            .single(
                "listen", flag: "--listen", "address the server listens on (host:port; [::1]:8080 for IPv6)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    guard let address = ListenAddress(text) else { throw SettingProblem("expected host:port, e.g. 127.0.0.1:8080") }
                    settings.listen = address
                }, render: { $0.listen.description }),
            .single(
                "cache.dir", flag: "--cache-dir",
                "cache directory, shared by serve and fetch (~: $XDG_CACHE_HOME/hlscache or ~/.cache/hlscache)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    guard !text.isEmpty, !text.contains("\0") else { throw SettingProblem("expected a directory path") }
                    settings.cacheDirectory = text
                }, render: { $0.cacheDirectory }),
            .size("cache.maxSize", \.maxCacheBytes, flag: "--max-cache-size", "size cap of the cache; LRU eviction past it"),
            .size(
                "cache.freeDiskCushion", \.freeDiskCushion, flag: "--free-disk-cushion",
                "free space left on the cache's file system; writes that would eat into it evict first or fail"),
            .size(
                "cache.maxObjectSize", \.maxObjectBytes, minimum: 1 << 20,
                "larger objects are relayed, not stored; a download whose clients all left completes only within it"),
            .size(
                "cache.sliceSize", \.sliceSize, minimum: 64 << 10,
                "objects of more than 8 slices are stored as slices of this size (asked for by range, or whole with a validator)"),
            .auto(
                "cache.memorySize", \.memoryCacheBytes,
                "hot objects kept in memory as well, so their hits read no file (auto: a 64th of the memory, 64 MiB to 1 GiB; 0 disables)",
                problem: "not a size (try 256MiB, 1GiB or 0), or auto",
                parse: { text in SettingText.size(text).flatMap { $0 <= Int64(Int.max) ? Int($0) : nil } },
                render: { SettingText.format(bytes: Int64($0)) }),
            .size("cache.memoryMaxObjectSize", \.memoryMaxObjectBytes, "larger objects never enter the memory tier"),
            .int(
                "cache.memoryLargeSends", \.memoryLargeSends, range: 0...100_000,
                "bodies over 64 KiB go from memory while fewer than this many other connections hold one (from memory or file) they have not asked again since; past it, as cache.memoryColdSends says (0: always sendfile)"
            ),
            .single(
                "cache.memoryColdSends",
                "a held body over 64 KiB sent past cache.memoryLargeSends, or not lately on a loop shared with other connections, where every connection on that loop holds one (else sendfile): auto (from memory while fewer than cache.memoryLargeSends other connections hold one, past that by sendfile), memory or file",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    guard let mode = ColdSendMode(rawValue: text.lowercased()) else {
                        throw SettingProblem("expected auto, memory or file")
                    }
                    settings.memoryColdSends = mode
                }, render: { $0.memoryColdSends.rawValue }),
            .list(
                "cache.volatileQueryParameters", \.volatileQueryParameters,
                "query parameters left out of cache keys (signed-URL tokens), case-insensitive"),
            .list(
                "http.allowedWebOrigins", \.allowedWebOrigins, flag: "--allowed-web-origins", validate: SettingKey.webOrigin,
                "web pages allowed to read content, keys and the API: loopback, origins (https://host[:port]), null, or *"),
            .list(
                "http.serverNames", \.serverNames, validate: SettingKey.serverName,
                "names a request's Host may give this server by in the absolute URLs of channel lists (name or name:port), besides the address the client reached"
            ),
            .auto(
                "http.eventLoops", \.eventLoops,
                "event loops (threads) serving clients and origins (auto: one per core the process may use, the container's CPU quota counted)",
                problem: "expected auto or a number of event loops from 1 to 1024",
                parse: { text in Int(text).flatMap { (1...1024).contains($0) ? $0 : nil } },
                render: { String($0) }),
            .single(
                "log.level", flag: "--log-level", "trace, debug, info, notice, warning, error or critical",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
                    guard levels.contains(text.lowercased()) else {
                        throw SettingProblem("expected one of \(levels.joined(separator: ", "))")
                    }
                    settings.logLevel = text.lowercased()
                }, render: { $0.logLevel }),
            .single(
                "log.format", flag: "--log-format", "text (one line per event) or json (one JSON object per line)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    guard let format = Settings.LogFormat(rawValue: text.lowercased()) else {
                        throw SettingProblem("expected text or json")
                    }
                    settings.logFormat = format
                }, render: { $0.logFormat.rawValue }),
            .bool(
                "log.access", \.accessLog, flag: "--[no-]access-log", "one access-log line per request (logger hlscache.access, level info)"
            ),
            .size("playlists.maxSize", \.maxPlaylistBytes, minimum: 1024, "larger playlists are refused (502 corrupted)"),
            .bool(
                "playlists.strict", \.strictPlaylists,
                "refuse (502 corrupted) playlists that depart from RFC 8216 instead of reading them as players do"),
            .double(
                "playlists.liveTTLFactor", \.liveTTLFactor, range: 0...0.5,
                "a live playlist is cached targetDuration × factor seconds (at most 0.5)"),
            .single(
                "live.rewindWindow",
                "live segments stored are kept this long after the origin's playlist drops them, and /rewind/… lists them before its window (off or 0: off; at most 7d)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if text.lowercased() == "off" {
                        settings.liveRewindWindow = .zero
                        return
                    }
                    guard let duration = SettingText.duration(text) else {
                        throw SettingProblem("not a duration (try 30m, 2h or 1d), or off")
                    }
                    guard duration <= .seconds(7 * 86_400) else { throw SettingProblem("at most 7d") }
                    settings.liveRewindWindow = duration
                }, render: { $0.liveRewindWindow == .zero ? "off" : SettingText.format($0.liveRewindWindow) }),
            .int(
                "prefetch.segments", \.prefetchSegments, flag: "--prefetch-segments", range: 0...64,
                "segments fetched ahead of a player in the rendition it plays (0 disables)"),
            .single(
                "prefetch.through",
                "a fleet's balancer (http://HOST:PORT): read-ahead asks it for each segment, so the node that owns the segment stores it (~: the origin)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if text.isEmpty || text == "~" || text.lowercased() == "none" {
                        settings.prefetchThrough = nil
                        return
                    }
                    guard let server = try? OriginURL(text), server.path == "/", server.query == nil else {
                        throw SettingProblem("expected the balancer's base URL, http://HOST:PORT")
                    }
                    settings.prefetchThrough = "\(server.scheme)://\(server.authority)"
                }, render: { $0.prefetchThrough }),
            .int(
                "limits.maxConnections", \.maxConnections, flag: "--max-connections", range: 1...1_000_000,
                "simultaneous client connections; more are closed at accept; serve holds it below ulimit -n minus a reserve"),
            .duration("limits.idleTimeout", \.idleTimeout, "a keep-alive connection with no request in progress is closed after this"),
            .duration("limits.requestHeadTimeout", \.requestHeadTimeout, "a request head must arrive within this (slowloris)"),
            .duration(
                "limits.requestBodyTimeout", \.requestBodyTimeout,
                "while a request body is expected, a connection that sends none of it for this long is closed"),
            .duration(
                "limits.sendTimeout", \.sendTimeout,
                "while response bytes wait to be sent, a client that takes none of them for this long is disconnected"),
            .int("limits.maxHeaderCount", \.maxHeaderCount, range: 1...10_000, "requests with more header fields get 431"),
            .size(
                "limits.sendSlice", \.sendSliceBytes,
                "larger response bodies go a slice at a time, between the event loop's other requests (0: whole bodies at once)"),
            .size(
                "limits.inFlightBuffer", \.inFlightBufferBytes, minimum: 64 << 10,
                "body bytes of one download held in memory; past it the origin waits for the cache file (or the slowest client)"),
            .size(
                "limits.inFlightMemory", \.inFlightMemoryBytes, minimum: 1 << 20,
                "body bytes all downloads hold in memory together; past it origin reads wait"),
            .duration(
                "shutdown.grace", \.shutdownGrace, flag: "--shutdown-grace", allowZero: true,
                "how long SIGTERM/SIGINT waits for requests in progress"),
            .bool("metrics.enabled", \.metricsEnabled, flag: "--[no-]metrics", "serve Prometheus metrics on /metrics"),
            .single(
                "api.token", flag: "--api-token", secret: true,
                "bearer token required by /api/v1 (~: loopback and api.allow only, no token)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if let problem = SettingKey.headerValue(text) { throw SettingProblem(problem) }
                    // Checked here, with the other values, so that a short token is a config error that names
                    // where it came from (flag, environment or file), for `--print-config` too.
                    if !text.isEmpty, text.count < 16 || text.contains(where: { $0 == " " || $0 == "\t" }) {
                        throw SettingProblem("expected at least 16 characters without spaces")
                    }
                    settings.apiToken = text.isEmpty ? nil : text
                }, render: { $0.apiToken }),
            .list(
                "api.allow", \.apiAllow, flag: "--api-allow", validate: SettingKey.cidr,
                "networks (CIDR) besides loopback allowed to use /api/v1"),
            .duration("origin.connectTimeout", \.originConnectTimeout, "connecting to an origin (TCP and TLS); past it 502 network"),
            .duration("origin.readTimeout", \.originReadTimeout, "longest silence between two reads from an origin; past it 504 timeout"),
            .int(
                "origin.maxConnectionsPerHost", \.originMaxConnectionsPerHost, range: 1...4096,
                "requests in flight (HTTP/1.1 connections) to one origin host at once; more wait for one to come free"),
            .duration(
                "origin.connectionWaitTimeout", \.originConnectionWaitTimeout,
                "how long a request waits for a free connection to its origin host; past it 503 busy"),
            .int(
                "origin.maxRedirects", \.originMaxRedirects, range: 0...20,
                "redirects followed per request, each re-checked against the policy"),
            .int(
                "origin.retries", \.originRetries, range: 0...10,
                "retries before the first byte (GET/HEAD; connect errors, resets, 502/503/504)"),
            .duration("origin.retryBaseDelay", \.originRetryBaseDelay, "delay before the first retry; doubled each time, with jitter"),
            .duration("origin.retryMaxDelay", \.originRetryMaxDelay, "the longest delay between retries"),
            .list(
                "origin.allowedHosts", \.originAllowedHosts, flag: "--allow-host",
                "only these origin hosts are proxied ([]: any host)"),
            .bool("origin.allowLoopback", \.originAllowLoopback, "origins on 127.0.0.0/8 and ::1 may be contacted"),
            .bool(
                "origin.allowPrivateNetworks", \.originAllowPrivateNetworks,
                "origins on 10/8, 172.16/12, 192.168/16, fc00::/7 may be contacted"),
            .bool("origin.allowLinkLocal", \.originAllowLinkLocal, "origins on 169.254/16 and fe80::/10 may be contacted"),
            .bool("origin.allowCloudMetadata", \.originAllowCloudMetadata, "169.254.169.254 and fd00:ec2::254 may be contacted"),
            .single(
                "origin.proxy", flag: "--upstream-proxy", mask: UpstreamProxyAddress.masked,
                "upstream proxy: [http://][user:password@]host:port, or socks5://host:port; the password is masked in output (~: none)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if text.isEmpty || text == "~" || text.lowercased() == "none" {
                        settings.originProxy = nil
                        return
                    }
                    _ = try UpstreamProxyAddress(parsing: text)
                    settings.originProxy = text
                }, render: { $0.originProxy }),
            .single(
                "origin.caFile", flag: "--origin-ca",
                "PEM file of certificate authorities trusted for https origins besides the system's (~: none)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if text.isEmpty || text == "~" || text.lowercased() == "none" {
                        settings.originCAFile = nil
                        return
                    }
                    guard let data = FileManager.default.contents(atPath: text) else { throw SettingProblem("cannot read \(text)") }
                    guard String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
                        throw SettingProblem("\(text) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
                    }
                    settings.originCAFile = text
                }, render: { $0.originCAFile }),
            .single(
                "origin.userAgent", "User-Agent sent to origins unless a request or an origin's headers set one (~: hlscache/VERSION)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if let problem = SettingKey.headerValue(text) { throw SettingProblem(problem) }
                    settings.originUserAgent = text.isEmpty ? nil : text
                }, render: { $0.originUserAgent }),
            .bool(
                "origin.keepCookies", \.originKeepCookies,
                "keep the cookies origins set (Set-Cookie) in memory and send them back, as a player would"),
            .optionalDuration(
                "keys.ttl", \.keyTTL, flag: "--key-ttl",
                "how long a fetched key (any method) is served before it is fetched again; none: no limit"),
            .list(
                "keys.allow", \.keysAllow, flag: "--keys-allow", validate: SettingKey.cidr,
                "networks (CIDR) besides loopback whose clients may receive keys"),
            .optionalDuration(
                "keys.autoRenewBefore", \.keyAutoRenewBefore, flag: "--key-auto-renew",
                "renew stored keys this long before they expire, while the origin answers; none: off"),
            .int("downloads.resourcesPerItem", \.downloadResourcesPerItem, range: 1...64, "resources in flight per downloading item"),
            .int("downloads.concurrentItems", \.downloadConcurrentItems, range: 1...64, "items serve downloads at once in the background"),
            .int("downloads.attempts", \.downloadAttempts, range: 1...20, "attempts per resource before the item fails"),
            .duration(
                "downloads.retryBaseDelay", \.downloadRetryBaseDelay, "delay before the second attempt; doubled each time, with jitter"),
            .duration("downloads.retryMaxDelay", \.downloadRetryMaxDelay, "the longest delay between attempts"),
            .duration(
                "downloads.idleRetryInterval", \.downloadIdleRetryInterval,
                "an item interrupted by an unavailable origin (idle) is tried again after this; doubled each time in a row"),
            .duration(
                "downloads.idleRetryMaxInterval", \.downloadIdleRetryMaxInterval, "the longest wait between two tries of an idle item"),
            .single(
                "downloads.rateLimit", flag: "--rate", "bandwidth cap per process over all items, bytes per second (~: none)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if text.isEmpty || text.lowercased() == "none" {
                        settings.downloadRateLimit = nil
                        return
                    }
                    guard let bytes = SettingText.size(text), bytes > 0 else { throw SettingProblem("not a rate (try 2MiB or 500KB)") }
                    settings.downloadRateLimit = bytes
                }, render: { $0.downloadRateLimit.map { SettingText.format(bytes: $0) } }),
            .bool(
                "downloads.keepFilesOnExpiry", \.keepFilesOnExpiry,
                "at an item's expiry keep its files as ordinary (unlocked, LRU) cache objects instead of evicting them; keys are purged either way"
            ),
            .int(
                "downloads.defaultSeconds", \.downloadDefaultSeconds, range: 0...DownloadItem.maxPrecacheSeconds,
                "precache length of an item created without seconds (fetch without --seconds, POST /items); 0: the whole stream"),
            .bool(
                "downloads.autoPurge", \.downloadAutoPurge,
                "serve removes expired items that are not locked, records included (as rm); a locked one stays listed as expired"),
            .optionalSize(
                "downloads.maxItemSize", \.downloadMaxItemBytes,
                "an item whose estimate or download is larger fails tooLarge; an item's own maxSize takes its place (~: none)"),
            .optionalSize(
                "downloads.dailyLimit", \.downloadDailyLimit,
                "bytes all downloads may fetch from origins per day; past it items wait in idle (dailyLimit) until midnight (~: none)"),
            .single(
                "downloads.window",
                "hours background downloads may run, HH:MM-HH:MM local time (22:00-06:00 runs over midnight); outside them items wait in idle (outsideWindow) (~: always)",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if text.isEmpty || text == "~" || text.lowercased() == "none" {
                        settings.downloadWindow = nil
                        return
                    }
                    guard let window = DownloadWindow(parsing: text) else { throw SettingProblem("expected HH:MM-HH:MM, e.g. 22:00-06:00") }
                    settings.downloadWindow = window.description
                }, render: { $0.downloadWindow }),
            .optionalSize(
                "downloads.itemRate", \.downloadItemRate,
                "bandwidth cap of each item without its own rate, bytes per second, within downloads.rateLimit (~: none)"),
            .list(
                "webhooks.urls", \.webhookURLs, validate: SettingKey.webhookURL,
                "URLs that receive a signed JSON POST for every item state change ([]: none)"),
            .single(
                "webhooks.secret", secret: true, "HMAC-SHA256 key signing each webhook (X-Hlscache-Signature); required with webhooks.urls",
                apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                    if text.isEmpty || text == "~" {
                        settings.webhookSecret = nil
                        return
                    }
                    if let problem = SettingKey.headerValue(text) { throw SettingProblem(problem) }
                    guard text.count >= 16 else { throw SettingProblem("expected at least 16 characters") }
                    settings.webhookSecret = text
                }, render: { $0.webhookSecret }),
            .int("webhooks.attempts", \.webhookAttempts, range: 1...20, "deliveries tried per event and receiver (a 2xx answer ends them)"),
            .duration(
                "webhooks.retryBaseDelay", \.webhookRetryBaseDelay,
                "wait before the second delivery; doubled for each further one, at most 5m"),
            .int(
                "webhooks.queueSize", \.webhookQueueSize, range: 1...1_000_000,
                "events waiting for delivery; past it the oldest is dropped and counted (hlscache_webhook_dropped_total)"),
            .duration(
                "webhooks.stopWait", \.webhookStopWait, allowZero: true,
                "at a stop, how long deliveries may go on to empty the queues (stopping is in them); then the rest is kept for the next start"
            ),
        ]
    }

    /// The setting named `name`.
    package static func key(_ name: String) -> SettingKey? {
        all.first { $0.name == name }
    }
}
