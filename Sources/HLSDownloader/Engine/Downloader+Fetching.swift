import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import NIOCore

extension Downloader {

    /// Transfers one media resource into a cache writer, with the retry budget; the caller commits it.
    func fetchResource(_ resource: PlannedResource, for item: DownloadItem, counter: RunCounter) async throws -> WrittenBody {
        let attempt: @Sendable () async throws -> WrittenBody = {
            let eventLoop = self.eventLoopGroup.next()
            let handler = StoreStreamHandler(
                store: self.store, key: resource.key, kind: resource.kind, locked: item.locked, threadPool: self.threadPool,
                limiter: counter.limiter, eventLoop: eventLoop, slice: resource.slice, onBytes: { counter.add($0) })
            var headers = item.headers.map { ($0.name, $0.value) }
            if let slice = resource.slice {
                let first = slice.index * slice.layout.sliceSize
                headers.append(("Range", "bytes=\(first)-\(first + slice.layout.sliceSize - 1)"))
            }
            // A recording's media through this process's own proxy when it serves viewers (``liveShare``).
            let shared =
                item.record != nil && item.headers.isEmpty && self.throughServer(of: item) == nil
                ? self.liveShare : nil
            let target = shared.flatMap { try? OriginURL($0.server + resource.url.proxyPath) } ?? self.requestURL(resource.url, for: item)
            let task = (shared?.client ?? self.origin).stream(target, headers: headers, on: eventLoop, handler: handler)
            return try await withTaskCancellationHandler {
                try await handler.futureResult.get()
            } onCancel: {
                task.cancel()
                // A batch waiting for the rate limiter would otherwise hold the transfer until its bytes are due.
                handler.cancel()
            }
        }
        let transfer: @Sendable () async throws -> WrittenBody = {
            let generation = counter.generation
            do {
                return try await attempt()
            } catch let error as OriginError where error == .httpStatus && (error.originStatus == 429 || error.originStatus == 503) {
                // The origin asks for less: this run goes on with half as many transfers at a time.
                if let narrowed = counter.pushedBack(generation: generation) {
                    self.emit(
                        .note(
                            id: item.id, message: "the origin answered \(error.originStatus): \(narrowed) transfer(s) at a time from now on"
                        ))
                }
                throw error
            }
        }
        return try await withRetries(resource.url) {
            do {
                return try await transfer()
            } catch let error as OriginError where error == .httpStatus && (error.originStatus == 401 || error.originStatus == 403) {
                // A CDN's token cookie (set on the top playlist) that this process never got, because the item resumed
                // from stored playlists, or that expired: ask for the top playlist again, then once more for this.
                guard await refreshCookies(for: item) else { throw error }
                return try await transfer()
            }
        }
    }

    /// Asks the origin for the item's top playlist again, only for the cookies it sets (its body is not used, and
    /// a failure changes nothing); at most once a minute per page, shared by the resources waiting on it
    /// (``CookieRefresher``, the proxy's too). Returns whether it ran (no cookie jar: no point).
    private func refreshCookies(for item: DownloadItem) async -> Bool {
        guard origin.keepsCookies, let top = try? OriginURL(item.url) else { return false }
        let url = requestURL(top, for: item)
        let headers = [OriginClient.acceptCompressed] + item.headers.map { ($0.name, $0.value) }
        await origin.refreshCookies(from: url, headers: headers, maxBytes: configuration.maxPlaylistBytes, within: .seconds(60))
        logger.debug("asked for \(url.redacted) again for its cookies after a 401/403")
        return true
    }

    /// Runs `body` up to ``DownloaderConfiguration/attempts`` times with exponential backoff and jitter,
    /// retrying only what another attempt can fix (5xx, 408, 429, network, timeouts, short bodies).
    func withRetries<T: Sendable>(_ url: OriginURL, isMaster: Bool = false, _ body: @Sendable () async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await body()
            } catch {
                if Task.isCancelled { throw DownloadError.cancelled }
                guard attempt < configuration.attempts, Self.isRetryable(error) else {
                    let failure = DownloadError.from(error, isMaster: isMaster)
                    // What the origin did wrong on every attempt (unreachable, 5xx, 429) may pass; a body of the wrong
                    // length (`corrupted`) is the origin's content, not its availability.
                    throw failure.with("\(url): \(failure.message)").transient(Self.isOutage(error))
                }
                attempt += 1
                logger.debug("retrying \(url) (attempt \(attempt)): \(error)")
                var delay = configuration.delay(beforeAttempt: attempt)
                // A 429/503 that says when to come back is obeyed, up to a minute (a prewarm can wait; nobody watches).
                if let retryAfter = (error as? OriginError)?.retryAfter { delay = max(delay, min(retryAfter, Self.longestRetryAfter)) }
                try await Task.sleep(for: delay)
            }
        }
    }

    /// The longest `Retry-After` a prewarm waits out before an attempt.
    static let longestRetryAfter = Duration.seconds(60)

    /// Whether `error` says the origin is unavailable for now (network, timeout, 5xx, 408, 429): retrying later can
    /// fix it, so an item ends its run `idle`, not `failed`.
    static func isOutage(_ error: any Error) -> Bool {
        guard let error = error as? OriginError else { return false }
        // Credentials the upstream proxy refused (its 407, reported as `network`) do not come right by waiting.
        if error == .network && error.message.contains("(407)") { return false }
        if error == .httpStatus { return error.originStatus >= 500 || error.originStatus == 408 || error.originStatus == 429 }
        return error == .network || error == .timeout || error == .truncated
    }

    static func isRetryable(_ error: any Error) -> Bool {
        switch error {
        case let error as OriginError:
            if error == .httpStatus { return error.originStatus >= 500 || error.originStatus == 408 || error.originStatus == 429 }
            return error == .network || error == .timeout || error == .truncated || error == .busy
        case let error as CacheStoreError:
            return error == .lengthMismatch
        default:
            return false
        }
    }
}
