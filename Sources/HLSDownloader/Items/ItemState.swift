/// Where an item is in its life (docs/design.md §5). Persisted by its raw value.
///
/// `queued → downloading → (cached | partiallyCached)`; `downloading ⇄ paused`; `downloading → idle` when
/// interrupted (resumes by itself); `cached | partiallyCached → (partiallyCached | evicted)` when the cache evicts
/// its objects; `→ failed` for what waiting cannot fix; `→ expired`; `→ deleted`.
package enum ItemState: String, Sendable, Hashable, CaseIterable, Codable {
    /// Recorded, waiting for a downloader (`fetch --detach`, `resume`).
    case queued
    /// Created without starting (`fetch --no-start`, API `"start": false`): its playlists are read, its renditions
    /// and estimate recorded; it waits until `resume` starts it (DTG's `infoLoaded`, THEOplayer's idle task).
    case ready
    /// A process is downloading it now.
    case downloading
    /// A process is recording it now (a live stream, `fetch --record`): the same transitions as `downloading`.
    case recording
    /// Stopped on request; only `resume` starts it again.
    case paused
    /// Interrupted: the process stopped or was killed (the next `fetch`, `resume` or `serve` continues it), or the
    /// origin was unavailable after the retries (`errorCode` says why; `serve` or the waiting `fetch` tries it again
    /// at ``DownloadItem/nextAttemptAt``).
    case idle
    /// Everything selected is in the cache (the whole stream).
    case cached
    /// The first N seconds of every selected rendition are in the cache (`--seconds N`).
    case partiallyCached
    /// Was `cached` or `partiallyCached` until the cache evicted every one of its segments (size cap, free-disk
    /// cushion); `resume` downloads them again. An item that keeps some is `partiallyCached` instead.
    case evicted
    /// Stopped for what waiting cannot fix (404, corrupted, unsupported, refused credentials, cache full), or an
    /// unavailable origin with `--fail-fast`; the item's `errorCode` says why.
    case failed
    /// Its expiry passed; its objects were evicted.
    case expired
    /// Removed; kept only with `rm --keep-metadata`.
    case deleted

    /// States in which nothing more happens without a command.
    package var isSettled: Bool {
        switch self {
        case .ready, .cached, .partiallyCached, .evicted, .failed, .expired, .deleted, .paused: true
        case .queued, .downloading, .recording, .idle: false
        }
    }

    /// States a scheduler picks up by itself: `queued`, and `idle` (interrupted items resume by themselves).
    package var isRunnable: Bool {
        switch self {
        case .queued, .idle: true
        case .ready, .downloading, .recording, .paused, .cached, .partiallyCached, .evicted, .failed, .expired, .deleted: false
        }
    }

    /// A process runs it now (`downloading` or `recording`).
    package var isActive: Bool { self == .downloading || self == .recording }
}
