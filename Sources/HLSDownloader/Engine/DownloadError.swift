import HLSCacheCore
import HLSCacheStore
import HLSOrigin
import HLSPlaylist

/// Why an item failed, or why an item command was refused. The codes are the item error codes of docs/design.md §5
/// (`notFound`, `network`, `http`, `timeout`, `corrupted`, `cacheFull`, `cancelled`, `keyUnavailable`, `expired`)
/// plus the command errors `unknownItem`, `invalidState` and `unsupported`.
///
/// Equality compares the kind only (`error == .cacheFull`); ``detail`` says why.
package struct DownloadError: Error, Hashable, Sendable, CustomStringConvertible, HTTPMappableError {
    private enum Code: String, Hashable, Sendable, CaseIterable {
        case notFound, network, http, timeout, corrupted, cacheFull, cancelled, keyUnavailable, expired
        case unknownItem, invalidState, unsupported
        case tooLarge, dailyLimit, outsideWindow
    }

    private var _code: Code
    /// A human-readable explanation (never header values).
    package private(set) var detail: String = ""
    /// Whether waiting can fix it: the origin was unreachable, timed out or answered 5xx, 408 or 429 on every
    /// attempt. An item run ending so is interrupted (`idle`, retried later), not `failed`.
    package internal(set) var isTransient: Bool = false

    private init(_code: Code) {
        self._code = _code
    }

    /// The origin answered 404 for the master (or media) playlist the item names.
    package static let notFound = DownloadError(_code: .notFound)
    /// The origin could not be reached, reset the connection or cut a body short, after every retry.
    package static let network = DownloadError(_code: .network)
    /// The origin answered an error status (other than a 404 on the master), after every retry.
    package static let http = DownloadError(_code: .http)
    /// The origin did not answer or stalled, after every retry.
    package static let timeout = DownloadError(_code: .timeout)
    /// A playlist is not valid HLS, or a body does not have the announced length.
    package static let corrupted = DownloadError(_code: .corrupted)
    /// The item does not fit in the cache (size cap or free-disk cushion).
    package static let cacheFull = DownloadError(_code: .cacheFull)
    /// The download was stopped (pause, delete, shutdown).
    package static let cancelled = DownloadError(_code: .cancelled)
    /// A key could not be fetched, or its length is not its method's (16 or 32 bytes).
    package static let keyUnavailable = DownloadError(_code: .keyUnavailable)
    /// The item's expiry has passed.
    package static let expired = DownloadError(_code: .expired)
    /// No item has the given id.
    package static let unknownItem = DownloadError(_code: .unknownItem)
    /// The command does not apply to the item's state (pausing a cached item, resuming a deleted one).
    package static let invalidState = DownloadError(_code: .invalidState)
    /// The stream is of a kind the downloader does not handle yet (live playlists).
    package static let unsupported = DownloadError(_code: .unsupported)

    /// The item is larger than its maximum size (`downloads.maxItemSize`, the item's `maxSize`): its estimate, or what
    /// its download fetched so far. The item fails.
    package static let tooLarge = DownloadError(_code: .tooLarge)
    /// The day's download volume (`downloads.dailyLimit`) is used up: the item waits in `idle` until the counter
    /// resets at midnight.
    package static let dailyLimit = DownloadError(_code: .dailyLimit)
    /// Outside the hours background downloads may run (`downloads.window`, the item's `window`): the item waits in
    /// `idle` until the window opens.
    package static let outsideWindow = DownloadError(_code: .outsideWindow)

    /// The error with the given stable code, or `nil` for an unknown code.
    package init?(code: String) {
        guard let known = Code(rawValue: code) else { return nil }
        self._code = known
    }

    /// A copy with a detail message.
    package func with(_ detail: String) -> DownloadError {
        var copy = self
        copy.detail = detail
        return copy
    }

    /// A copy marked as fixable by waiting (``isTransient``).
    func transient(_ value: Bool = true) -> DownloadError {
        var copy = self
        copy.isTransient = value
        return copy
    }

    /// The stable machine-readable code (`notFound`, `cacheFull`, …).
    package var code: String { _code.rawValue }

    /// The status an HTTP API answers with when this error ends a request.
    package var httpStatus: Int {
        switch _code {
        case .notFound, .unknownItem: 404
        case .network, .http, .corrupted, .keyUnavailable: 502
        case .timeout: 504
        case .cacheFull: 507
        case .cancelled: 503
        case .expired: 410
        case .invalidState: 409
        case .unsupported: 422
        case .tooLarge: 413
        case .dailyLimit: 429
        case .outsideWindow: 503
        }
    }

    /// The detail, or a generic sentence when there is none.
    package var message: String { detail.isEmpty ? "download failed: \(code)" : detail }

    /// Whether another attempt at the same resource may succeed.
    var isRetryable: Bool {
        switch _code {
        case .network, .http, .timeout, .corrupted: true
        case .notFound, .cacheFull, .cancelled, .keyUnavailable, .expired, .unknownItem, .invalidState, .unsupported, .tooLarge,
            .dailyLimit,
            .outsideWindow:
            false
        }
    }

    /// Whether a download policy holds the item back for now (``dailyLimit``, ``outsideWindow``): it waits in `idle`.
    package var isPolicyHold: Bool { _code == .dailyLimit || _code == .outsideWindow }

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs._code == rhs._code }
    package func hash(into hasher: inout Hasher) { hasher.combine(_code) }
    package var description: String { detail.isEmpty ? code : "\(code): \(detail)" }
}

extension DownloadError {
    /// Maps what a resource fetch threw to an item error code.
    ///
    /// - Parameter isMaster: a 404 on the item's own playlist is `notFound`; on anything else it is `http`.
    static func from(_ error: any Error, isMaster: Bool = false) -> DownloadError {
        switch error {
        case let error as DownloadError:
            return error
        case let error as OriginError:
            if error == .httpStatus {
                let status = error.originStatus
                if status == 404 && isMaster { return DownloadError.notFound.with("the origin answered 404 for the playlist") }
                return DownloadError.http.with("the origin answered \(status)")
            }
            if error == .timeout || error == .busy { return DownloadError.timeout.with(error.message) }
            if error == .cancelled { return DownloadError.cancelled.with(error.message) }
            if error == .tooLarge || error == .encoding { return DownloadError.corrupted.with(error.message) }
            return DownloadError.network.with(error.message)
        case let error as CacheStoreError:
            if error == .cacheFull { return DownloadError.cacheFull.with(error.detail) }
            if error == .lengthMismatch { return DownloadError.corrupted.with(error.detail) }
            return DownloadError.cacheFull.with("the cache cannot store: \(error)")
        case let error as PlaylistError:
            return DownloadError.corrupted.with("invalid playlist: \(error)")
        case is CancellationError:
            return DownloadError.cancelled
        default:
            return DownloadError.network.with("\(error)")
        }
    }
}
