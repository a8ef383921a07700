import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSDownloader
import HLSKeys
import HLSProxy
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle

/// The admin API (`/api/v1`, docs/api.md) and the console (`/`), plugged into the proxy as its
/// ``ProxyRouteExtension``: items (the `hlscache fetch`/`pause`/`resume`/`lock`/`rm` of the SDKs, over HTTP), keys
/// without their bytes, Server-Sent Events, playback records and cache statistics.
///
/// Requests are answered on the event loop only for routing and access checks; SQLite work runs on the thread pool.
/// Call ``run()`` in a task for the life of the server: it polls `items.sqlite` for changes made by other
/// processes, writes playback records and sends heartbeats.
package final class AdminAPI: ProxyRouteExtension, Service {
    let configuration: AdminConfiguration
    /// What is set after ``init`` (by `serve` and its reloads), under one lock.
    private struct State {
        var access: AdminAccess
        var configurationStatus = ConfigurationStatus()
        var policyControl: PolicyControl?
        /// The last hour of the proxy's traffic, per minute (`GET /stats`, the console).
        var traffic = TrafficHistory()
    }
    private let state: NIOLockedValueBox<State>
    /// Who may use the API: from ``configuration`` until ``setAccess(token:allowedNetworks:)`` (a reload).
    var access: AdminAccess { state.withLockedValue { $0.access } }
    /// The configuration's part of `/status`.
    package var configurationStatus: ConfigurationStatus { state.withLockedValue { $0.configurationStatus } }
    /// `/policies`, set by `serve` (nil: the endpoint answers 404).
    var policyControl: PolicyControl? { state.withLockedValue { $0.policyControl } }
    let downloader: Downloader
    let keys: KeyService
    let hub: EventHub
    let recorder: ConsumptionRecorder
    /// What the poll reads: only the items changed since the last one.
    let feed: ItemChangeFeed
    /// Where the item database is read and written: threads of its own unless given, because another process's
    /// write can hold `items.sqlite` for its busy timeout, and the proxy's cache writes, playlists and keys on the
    /// shared pool must not wait behind that.
    let threadPool: NIOThreadPool
    private let ownsThreadPool: Bool
    let logger: Logger
    let wake: @Sendable () -> Void
    let startedAt = Date()
    /// Where the traffic history reads the proxy's running totals.
    func attachTraffic(_ source: @escaping @Sendable () -> TrafficTotals) { state.withLockedValue { $0.traffic.attach(source) } }
    /// Adds what the proxy served since the last reading to the traffic history.
    func sampleTraffic() { state.withLockedValue { $0.traffic.sample() } }
    /// The traffic history's last hour, per minute.
    func trafficSeries() -> [TrafficHistory.Sample] { state.withLockedValue { $0.traffic.series() } }

    var items: ItemStore { downloader.items }
    var store: CacheStore { downloader.store }

    /// - Parameters:
    ///   - downloader: the server's downloader (its `onEvent` should feed `hub`).
    ///   - hub: the event hub; create it first and pass `hub.publish` as the downloader's `onEvent`.
    ///   - volatileQueryParameters: the proxy's, so served URLs map to the items' cache keys.
    ///   - wake: asks the download scheduler to look at the items now (a created or resumed item starts at once).
    package init(
        configuration: AdminConfiguration, downloader: Downloader, keys: KeyService, hub: EventHub, volatileQueryParameters: [String],
        threadPool: NIOThreadPool? = nil, logger: Logger, wake: @escaping @Sendable () -> Void = {}
    ) {
        self.configuration = configuration
        self.state = NIOLockedValueBox(State(access: AdminAccess(configuration: configuration)))
        self.downloader = downloader
        self.keys = keys
        self.hub = hub
        self.recorder = ConsumptionRecorder(
            store: downloader.store, items: downloader.items, volatileParameters: volatileQueryParameters, logger: logger)
        self.feed = ItemChangeFeed(items: downloader.items)
        if let threadPool {
            self.threadPool = threadPool
            self.ownsThreadPool = false
        } else {
            let pool = NIOThreadPool(numberOfThreads: 2)
            pool.start()
            self.threadPool = pool
            self.ownsThreadPool = true
        }
        self.logger = logger
        self.wake = wake
    }

    /// Replaces `api.token` and `api.allow`: the next request is judged by them (a reload; docs/operations.md#reload).
    package func setAccess(token: String?, allowedNetworks: [IPNetwork]) {
        let access = AdminAccess(configuration: AdminConfiguration(token: token, allowedNetworks: allowedNetworks))
        state.withLockedValue { $0.access = access }
    }

    /// Sets what `/policies` reads and changes (`serve`, once, before the server listens).
    package func setPolicyControl(_ control: PolicyControl) {
        state.withLockedValue { $0.policyControl = control }
    }

    /// Changes the configuration's part of `/status` (the reloader); `change` must not call out.
    package func updateConfigurationStatus(_ change: (inout ConfigurationStatus) -> Void) {
        state.withLockedValue { change(&$0.configurationStatus) }
    }

    deinit {
        if ownsThreadPool { threadPool.shutdownGracefully { _ in } }
    }

    // MARK: - ProxyRouteExtension

    package func didRespond(to request: ProxyRequest, status: HTTPResponseStatus, headers: HTTPHeaders, shard: Int) {
        recorder.observe(request, status: status, headers: headers, shard: shard)
    }

    package func handle(_ request: ProxyRequest, responder: ProxyResponder) {
        let target = request.head.uri
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = parts[0]
        let query = parts.count > 1 ? Self.parseQuery(parts[1]) : [:]
        if path == "/" {
            if let denied = access.check(request, queryToken: nil, needsToken: false) {
                return responder.send(error: denied)
            }
            guard request.method == .GET || request.method == .HEAD else {
                return responder.send(error: AdminError.methodNotAllowed("the console answers GET"), extraHeaders: ["Allow": "GET, HEAD"])
            }
            // The console holds no data: its script reads the API (with the token the user gives it, if one is set).
            return ConsolePage.send(to: responder)
        }
        guard path.hasPrefix("/api/v1/") else {
            return responder.send(error: AdminError.notFound("the admin API lives under /api/v1/ (docs/api.md)"))
        }
        // Each segment percent-decoded after the split (an id is a segment; `%2F` inside one is no separator):
        // clients escape what they put in a path, and `.`/`..` only reach the server as `%2E`/`%2E%2E`.
        let raw = path.dropFirst("/api/v1/".count).split(separator: "/", omittingEmptySubsequences: false)
        let decoded = raw.map { $0.removingPercentEncoding }
        guard decoded.allSatisfy({ $0 != nil }) else {
            return responder.send(error: AdminError.badRequest("malformed percent-encoding in \(path)"))
        }
        let segments = decoded.compactMap { $0 }
        if let denied = access.check(request, queryToken: segments == ["events"] ? query["access_token"] : nil) {
            var extra: HTTPHeaders = [:]
            if denied.httpStatus == 401 { extra.add(name: "WWW-Authenticate", value: "Bearer realm=\"hlscache\"") }
            return responder.send(error: denied, extraHeaders: extra)
        }
        if let unsafe = AdminAccess.refusesUnsafe(request) { return responder.send(error: unsafe) }
        route(request, route: segments, query: query, responder: responder)
    }

    // MARK: - Routing

    private func route(_ request: ProxyRequest, route: [String], query: [String: String], responder: ProxyResponder) {
        let method = request.method
        let isRead = method == .GET || method == .HEAD
        let actions: Set<String> = ["pause", "resume", "lock", "unlock", "verify"]
        switch route.count {
        case 1 where route[0] == "items" && isRead:
            return blocking(responder) { try self.listItems(query) }
        case 1 where route[0] == "items" && method == .POST:
            let body = request.body.map { Array($0.readableBytesView) } ?? []
            if let list = (try? JSONSerialization.jsonObject(with: Data(body))) as? [Any] {
                let entries: [BulkEntry]
                do {
                    entries = try Self.bulkEntries(list, defaultSeconds: downloader.configuration.defaultSeconds)
                } catch {
                    return responder.send(error: error)
                }
                return blocking(responder) { try self.createItems(entries) }
            }
            let parsed: ItemRequest
            do {
                parsed = try ItemRequest.parse(body, defaultSeconds: downloader.configuration.defaultSeconds)
            } catch {
                return responder.send(error: error)
            }
            if parsed.dryRun { return asynchronous(responder) { try await self.dryRun(parsed) } }
            if parsed.posterOnly { return asynchronous(responder) { try await self.createPosterOnly(parsed) } }
            return blocking(responder) { try self.createItem(parsed) }
        case 2 where route == ["items", "batch"] && method == .POST:
            let body = request.body.map { Array($0.readableBytesView) } ?? []
            return blocking(responder) { try self.batch(body) }
        case 3 where route[0] == "items" && route[2] == "keys" && isRead:
            let id = route[1]
            return blocking(responder) { try self.itemKeys(id) }
        case 4 where route[0] == "items" && route[2] == "keys" && route[3] == "renew" && method == .POST:
            let id = route[1]
            return asynchronous(responder) { try await self.renewItemKeys(id) }
        case 3 where route[0] == "keys" && route[2] == "renew" && method == .POST:
            let id = route[1]
            return asynchronous(responder) { try await self.renewKey(id) }
        case 2 where route[0] == "items" && isRead:
            let id = route[1]
            return blocking(responder) { try self.showItem(id) }
        case 2 where route[0] == "items" && method == .PATCH:
            guard Self.isJSON(request) else {
                return responder.send(error: AdminError.unsupportedMediaType("send the changes as Content-Type: application/json"))
            }
            let (id, body) = (route[1], request.body.map { Array($0.readableBytesView) } ?? [])
            return blocking(responder) { try self.changeItem(id, body) }
        case 2 where route[0] == "items" && method == .DELETE:
            let id = route[1]
            let keep: Bool
            switch query["keepMetadata"] {
            case nil, "false", "0": keep = false
            case "true", "1": keep = true
            case let other?:
                // Not taken as false: an unrecognised spelling (`yes`) would purge what the client meant to keep.
                return responder.send(error: AdminError.badRequest("keepMetadata=\(other): expected true, false, 1 or 0"))
            }
            return blocking(responder) { try self.removeItem(id, keepMetadata: keep) }
        case 3 where route[0] == "items" && ["master.m3u8", "offline.m3u8"].contains(route[2]) && isRead:
            let (id, offline) = (route[1], route[2] == "offline.m3u8")
            return blocking(responder) { try self.playbackPlaylist(id, offline: offline) }
        case 4 where route[0] == "items" && route[2] == "offline" && route[3].hasSuffix(".m3u8") && isRead:
            guard let rendition = Int(route[3].dropLast(".m3u8".count)), rendition >= 0 else {
                return responder.send(error: AdminError.notFound("no such rendition: \(route[3])"))
            }
            let id = route[1]
            return blocking(responder) { try self.offlineMediaPlaylist(id, rendition: rendition) }
        case 3 where route[0] == "items" && actions.contains(route[2]) && method == .POST:
            let (id, action) = (route[1], route[2])
            return blocking(responder) { try self.act(action, on: id) }
        case 1 where route[0] == "tags" && isRead:
            return blocking(responder) { try self.listTags() }
        case 1 where route[0] == "keys" && isRead:
            return blocking(responder) { try self.listKeys() }
        case 1 where route[0] == "status" && isRead:
            return blocking(responder) { try self.status() }
        case 1 where route[0] == "policies" && isRead:
            return blocking(responder) { try self.showPolicies() }
        case 1 where route[0] == "policies" && method == .PATCH:
            guard Self.isJSON(request) else {
                return responder.send(error: AdminError.unsupportedMediaType("send the changes as Content-Type: application/json"))
            }
            let body = request.body.map { Array($0.readableBytesView) } ?? []
            return asynchronous(responder) { try await self.changePolicies(body) }
        case 1 where route[0] == "stats" && isRead:
            return blocking(responder) { try self.stats() }
        case 1 where route[0] == "events" && method == .GET:
            let filter: EventFilter
            do {
                filter = try EventFilter.parse(query)
            } catch {
                return responder.send(error: error)
            }
            return subscribe(responder, filter: filter)
        default:
            if let allowed = Self.allowedMethods(route) {
                responder.send(
                    error: AdminError.methodNotAllowed("\(method.rawValue) is not supported here"), extraHeaders: ["Allow": allowed])
            } else {
                responder.send(error: AdminError.notFound("no such endpoint (docs/api.md)"))
            }
        }
    }

    private static func allowedMethods(_ route: [String]) -> String? {
        if route == ["items"] { return "GET, HEAD, POST" }
        if route == ["items", "batch"] { return "GET, HEAD, POST, PATCH, DELETE" }
        if route.count == 3 && route[0] == "items" && route[2] == "keys" { return "GET, HEAD" }
        if route.count == 4 && route[0] == "items" && route[2] == "keys" && route[3] == "renew" { return "POST" }
        if route.count == 3 && route[0] == "keys" && route[2] == "renew" { return "POST" }
        if route.count == 2 && route[0] == "items" { return "GET, HEAD, PATCH, DELETE" }
        if route.count == 3 && route[0] == "items" && ["pause", "resume", "lock", "unlock", "verify"].contains(route[2]) { return "POST" }
        if route.count == 3 && route[0] == "items" && ["master.m3u8", "offline.m3u8"].contains(route[2]) { return "GET, HEAD" }
        if route.count == 4 && route[0] == "items" && route[2] == "offline" { return "GET, HEAD" }
        if route == ["keys"] || route == ["status"] || route == ["stats"] || route == ["tags"] { return "GET, HEAD" }
        if route == ["events"] { return "GET" }
        if route == ["policies"] { return "GET, HEAD, PATCH" }
        return nil
    }

    static func isJSON(_ request: ProxyRequest) -> Bool {
        guard let type = request.header("content-type") else { return false }
        return type.split(separator: ";")[0].trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    static func parseQuery(_ query: Substring) -> [String: String] {
        var result: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(kv[0]).removingPercentEncoding ?? String(kv[0])
            let value =
                kv.count > 1 ? (String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(kv[1])) : ""
            // A repeated parameter (`state=idle&state=queued`) reads as a comma-separated list.
            result[name] = result[name].map { $0 + "," + value } ?? value
        }
        return result
    }

    /// A JSON answer computed on the thread pool.
    struct Reply: Sendable {
        var status: HTTPResponseStatus
        var json: String
        var headers: [(String, String)] = []
        /// The body's type: JSON, or a playlist (the item playback playlists).
        var contentType = "application/json"
    }

    private func blocking(_ responder: ProxyResponder, _ body: @escaping @Sendable () throws -> Reply) {
        reply(threadPool.runIfActive(eventLoop: responder.eventLoop, body), to: responder)
    }

    /// A JSON answer computed in a task (it waits on the network: a dry run, a key renewal).
    private func asynchronous(_ responder: ProxyResponder, _ body: @escaping @Sendable () async throws -> Reply) {
        let promise = responder.eventLoop.makePromise(of: Reply.self)
        promise.completeWithTask(body)
        reply(promise.futureResult, to: responder)
    }

    private func reply(_ future: EventLoopFuture<Reply>, to responder: ProxyResponder) {
        future.whenComplete { result in
            switch result {
            case .success(let reply):
                var headers = HTTPHeaders()
                headers.add(name: "Content-Type", value: reply.contentType)
                headers.add(name: "Cache-Control", value: "no-store")
                for (name, value) in reply.headers { headers.add(name: name, value: value) }
                var buffer = ByteBuffer()
                if reply.status != .noContent { buffer.writeString(reply.json + "\n") }
                responder.send(status: reply.status, headers: headers, body: buffer)
            case .failure(let error as AdminError):
                responder.send(error: error)
            case .failure(let error as DownloadError):
                responder.send(error: Self.map(error))
            case .failure(let error as KeyError):
                responder.send(error: AdminError.internalError("key store: \(error.message)"))
            case .failure(let error):
                responder.send(error: AdminError.internalError("\(error)"))
            }
        }
    }

    /// Download errors keep their codes; the ones a request can cause get the API's statuses.
    static func map(_ error: DownloadError) -> any HTTPMappableError {
        if error == .unknownItem { return AdminError.notFound(error.message) }
        if error == .invalidState { return AdminError.conflict(error.message) }
        if error == .corrupted { return AdminError.internalError(error.message) }
        return error
    }

    // MARK: - Events

    private func subscribe(_ responder: ProxyResponder, filter: EventFilter) {
        let hub = self.hub
        let stream = EventStream(responder: responder, capacity: configuration.maxBufferedEvents, filter: filter) { stream in
            hub.unsubscribe(stream)
        }
        stream.start(first: hub.subscribe(stream))
    }

    // MARK: - Background work

    /// Polls for changes by other processes, records playback and sends heartbeats until the task is cancelled or
    /// the service group shuts down gracefully; then sends `stopping` (a server's) and ends every event stream once
    /// it is written, within ``AdminConfiguration/stopWait`` (so the proxy's drain does not wait for them).
    package func run() async throws {
        await cancelWhenGracefulShutdown { await self.loop() }
        hub.serverStopping()
        await hub.closeAll(within: configuration.stopWait)
    }

    private func loop() async {
        var lastHeartbeat = ContinuousClock.now
        while !Task.isCancelled {
            await pollOnce()
            if ContinuousClock.now - lastHeartbeat >= configuration.heartbeatInterval {
                lastHeartbeat = .now
                hub.ping()
            }
            try? await Task.sleep(for: configuration.pollInterval)
        }
    }

    /// One round of ``run()``: read the items, announce changes, record playback.
    package func pollOnce() async {
        let hub = self.hub
        let recorder = self.recorder
        let feed = self.feed
        let logger = self.logger
        let api = self
        try? await threadPool.runIfActive {
            do {
                let readAt = ContinuousClock.now
                api.sampleTraffic()
                let changes = try feed.next(alsoKnown: hub.unpolledItems)
                hub.poll(changes, readAt: readAt)
                for (id, record) in recorder.flush(changes) {
                    hub.send(.played(id: id, lastPlayedAt: record.lastPlayedAt, servedSeconds: record.servedSeconds))
                }
            } catch {
                logger.warning("admin: cannot read the items: \(error)")
            }
        }
    }
}
