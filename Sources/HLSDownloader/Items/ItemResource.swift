/// One object of an item, as the items table remembers it: so `lock`, `rm` and expiry know which cache
/// objects belong to the item, and progress survives a restart.
package struct ItemResource: Sendable, Hashable, Codable {
    /// The cache key (``HLSCacheCore/CacheKey/value``).
    package var key: String
    /// The origin URL.
    package var url: String
    /// The object kind (`playlist`, `segment`, `init`, `key`).
    package var kind: String
    /// Its size once stored.
    package var size: Int64?
    /// Whether it has been stored (or found stored).
    package var done: Bool

    /// A resource row.
    package init(key: String, url: String, kind: String, size: Int64? = nil, done: Bool = false) {
        self.key = key
        self.url = url
        self.kind = kind
        self.size = size
        self.done = done
    }
}

/// Sums over an item's resources: what its progress and its size estimate are computed from.
package struct ResourceTotals: Sendable, Hashable {
    /// Bytes of the resources stored so far.
    package var bytesDone: Int64
    package var segmentsDone: Int
    package var segmentsTotal: Int
    /// Bytes of the segments stored so far.
    package var doneSegmentBytes: Int64
    /// Bytes of every resource whose size is known: stored, or a byte range the playlist gives.
    package var knownBytes: Int64
    /// Segments neither stored nor of known size.
    package var unknownSegments: Int

    package init(bytesDone: Int64, segmentsDone: Int, segmentsTotal: Int, doneSegmentBytes: Int64, knownBytes: Int64, unknownSegments: Int)
    {
        self.bytesDone = bytesDone
        self.segmentsDone = segmentsDone
        self.segmentsTotal = segmentsTotal
        self.doneSegmentBytes = doneSegmentBytes
        self.knownBytes = knownBytes
        self.unknownSegments = unknownSegments
    }
}

/// An item's progress counters as ``ItemStore/markDone(_:key:size:estimatedTotal:)`` leaves them.
package struct ItemProgressCounts: Sendable, Hashable {
    package var bytesDone: Int64
    /// Estimated until every size is known; never below `bytesDone`.
    package var bytesTotal: Int64
    package var segmentsDone: Int
    package var segmentsTotal: Int
}
