/// One action on many items: `POST /api/v1/items/batch` and `hlscache pause|resume|rm|lock|unlock --state/--tag/--all`
/// run each item through ``act(_:on:keepMetadata:)``, so both do the same.
package enum BatchAction: String, Sendable, CaseIterable {
    case pause, resume, delete, lock, unlock, verify
}

extension Downloader {
    /// Runs `action` on one item of a batch.
    /// - Returns: the item after it (`nil` when deleted without keeping its metadata).
    /// - Throws: what the single action throws (``DownloadError/unknownItem``, ``DownloadError/invalidState``, …).
    package func act(_ action: BatchAction, on id: String, keepMetadata: Bool = false) throws(DownloadError) -> DownloadItem? {
        switch action {
        case .pause: return try pause(id)
        case .resume: return try resume(id)
        case .verify: return try verify(id)
        case .lock: return try setLocked(id, true)
        case .unlock: return try setLocked(id, false)
        case .delete:
            try remove(id, keepMetadata: keepMetadata)
            return keepMetadata ? try items.require(id) : nil
        }
    }
}
