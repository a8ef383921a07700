import HLSCacheStore
import Logging
import NIOConcurrencyHelpers

/// Reports responses the proxy relayed but could not store, without a log line per miss: on a full disk every miss
/// fails the same way (one run logged 1,869 identical warnings). The first failure is a warning; the next ones are
/// counted (`hlscache_cache_write_failures_total`) and summed up in one line at most once per ``interval``, written
/// when a failure comes after it has passed.
final class CacheWriteFailureLog: Sendable {
    static let interval = Duration.seconds(60)

    private struct State {
        var lastLine: ContinuousClock.Instant?
        var unreported = 0
        var unreportedFull = 0
    }

    private let metrics: ProxyMetrics
    private let logger: Logger
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = NIOLockedValueBox(State())

    init(metrics: ProxyMetrics, logger: Logger, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.metrics = metrics
        self.logger = logger
        self.now = now
    }

    /// `label` (an origin URL without its query) was relayed but not stored because the store failed with `error`.
    /// A body that did not match its `Content-Length` is the origin's fault, counted as an origin error: logged at
    /// debug level only.
    func record(_ error: any Error, label: String) {
        let full = (error as? CacheStoreError) == .cacheFull
        if (error as? CacheStoreError) == .lengthMismatch {
            logger.debug("not caching \(label): \(error)")
            return
        }
        metrics.cacheWriteFailed(error)
        let now = self.now()
        let line = state.withLockedValue { state -> String? in
            state.unreported += 1
            if full { state.unreportedFull += 1 }
            guard let last = state.lastLine else {
                state.lastLine = now
                state.unreported = 0
                state.unreportedFull = 0
                return
                    "not caching \(label): \(error) (responses are still served; further cache write failures are counted in hlscache_cache_write_failures_total and summed up here at most once a minute)"
            }
            guard now - last >= Self.interval else { return nil }
            defer {
                state.lastLine = now
                state.unreported = 0
                state.unreportedFull = 0
            }
            let reason =
                state.unreportedFull == state.unreported ? "the cache is full" : "\(state.unreportedFull) of them for want of space"
            return "\(state.unreported) more responses not cached since the last such line (\(reason)); the latest: \(label): \(error)"
        }
        if let line { logger.warning("\(line)") }
        logger.debug("not caching \(label): \(error)")
    }
}
