/// What the downloader reports while it works, for the CLI's progress line and a later HTTP API.
package enum DownloadEvent: Sendable, Hashable {
    /// The item moved to `state`; `errorCode` is set for `failed` and `expired`.
    case stateChanged(id: String, state: ItemState, errorCode: String?)
    /// The item's plan is known: renditions chosen, resources counted, bytes estimated.
    case planned(id: String, resources: Int, segments: Int, estimatedBytes: Int64?)
    /// Something the user should know about the plan (a language filter that matched nothing).
    case note(id: String, message: String)
    /// A resource was stored (or found stored); the counters are the item's totals.
    case progress(id: String, progress: DownloadProgress)
    /// The cache evicted `resources` of the item's stored objects (size cap, free-disk cushion), or a re-check
    /// (`verify`) found them gone; the counters are what is left, `state` the item's state after it.
    case evicted(id: String, state: ItemState, resources: Int, bytesDone: Int64, segmentsDone: Int)
}

/// The counters of one item at one moment.
package struct DownloadProgress: Sendable, Hashable, Codable {
    package var bytesDone: Int64
    /// Estimated until every size is known.
    package var bytesTotal: Int64
    package var segmentsDone: Int
    package var segmentsTotal: Int
    /// Origin bytes per second, the moving average over ``TransferRate/window`` (resources found cached do not count);
    /// `nil` when not known yet.
    package var bytesPerSecond: Double?

    /// Seconds left at the current rate, if it can be told.
    package var eta: Double? { DownloadProgress.eta(bytesDone: bytesDone, bytesTotal: bytesTotal, bytesPerSecond: bytesPerSecond) }

    /// What is left over the speed; `nil` when the speed is unknown or 0, or the total is not above what is done.
    package static func eta(bytesDone: Int64, bytesTotal: Int64, bytesPerSecond: Double?) -> Double? {
        guard let bytesPerSecond, bytesPerSecond > 0, bytesTotal > bytesDone else { return nil }
        return Double(bytesTotal - bytesDone) / bytesPerSecond
    }

    /// Counters.
    package init(bytesDone: Int64, bytesTotal: Int64, segmentsDone: Int, segmentsTotal: Int, bytesPerSecond: Double?) {
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.segmentsDone = segmentsDone
        self.segmentsTotal = segmentsTotal
        self.bytesPerSecond = bytesPerSecond
    }
}
