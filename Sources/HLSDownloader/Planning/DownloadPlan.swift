import HLSCacheCore
import HLSCacheStore
import HLSPlaylist

/// Everything one item stores, derived from its playlists (pure: no I/O), plus the byte estimate.
///
/// Playlists come first (so the proxy can serve the stream as soon as any segment is there), then for each
/// rendition in turn its keys, init sections and segments in playback order.
package struct DownloadPlan: Sendable {
    /// The media playlists chosen, with what the estimate used.
    package var renditions: [PlannedRendition]
    /// Playlists (master and media), stored raw with kind `.playlist`.
    package var playlists: [PlannedResource]
    /// Keys, init sections and segments, without duplicates.
    package var media: [PlannedResource]
    /// Whether some segments were left out because they start after the precache length.
    package var isPartial: Bool
    /// What the user should know about the selection (a language filter that matched nothing).
    package var notes: [String] = []

    /// Every resource, playlists first.
    package var resources: [PlannedResource] { playlists + media }
    /// The number of distinct segment resources.
    package var segmentCount: Int { media.count { $0.kind == .segment } }
    /// BANDWIDTH × selected duration for variants, exact byte-range sums when the playlist gives them;
    /// `nil` when nothing tells (a media playlist with neither).
    package var estimatedBytes: Int64? {
        let values = renditions.compactMap(\.estimatedBytes)
        return values.isEmpty ? nil : values.reduce(0, +)
    }

    /// Builds the plan.
    ///
    /// - Parameters:
    ///   - playlists: the item's own playlist (master or media) first, then the chosen media playlists.
    ///   - renditions: each chosen media playlist, parsed.
    ///   - seconds: the precache length; 0 = everything.
    ///   - volatileParameters: query parameters left out of cache keys.
    ///   - slicing: how large files are cut into slices; a file addressed by byte ranges that reach past
    ///     ``SliceLayout/threshold`` is planned as the slices the selected segments (and their init sections) cover,
    ///     not whole. Nil: such files are stored whole.
    /// - Throws: ``DownloadError/corrupted`` for a URL that cannot be fetched.
    package static func make(
        playlists: [OriginURL],
        renditions: [(selected: SelectedPlaylist, media: MediaPlaylist)],
        seconds: Int,
        volatileParameters: [String] = CacheKey.defaultVolatileParameters,
        slicing: SliceLayout? = nil
    ) throws(DownloadError) -> DownloadPlan {
        var seen: Set<CacheKey> = []
        var plannedPlaylists: [PlannedResource] = []
        for url in playlists {
            let key = CacheKey(url, volatileParameters: volatileParameters)
            if seen.insert(key).inserted { plannedPlaylists.append(PlannedResource(url: url, key: key, kind: .playlist)) }
        }
        var media: [PlannedResource] = []
        var indexByKey: [CacheKey: Int] = [:]
        var planned: [PlannedRendition] = []
        var isPartial = false
        for (selected, playlist) in renditions {
            let segments = playlist.segments(startingBefore: Double(seconds))
            // The first N seconds need the durations: a segment without one (an EXTINF that is missing, negative
            // or not a number, read by the tolerant reader as 0) makes them unknowable. Said, never guessed.
            if seconds > 0, let unknown = segments.first(where: { $0.duration <= 0 }) {
                throw DownloadError.corrupted.with(
                    "cannot tell the first \(seconds) s of \(selected.url): the segment at line \(unknown.line) has no usable duration "
                        + "(its #EXTINF is missing, negative or not a number); fetch the whole stream (without --seconds) instead")
            }
            if segments.count < playlist.segments.count { isPartial = true }
            let duration = segments.reduce(0.0) { $0 + $1.duration }
            // A file addressed by byte ranges is stored whole (a player may seek anywhere in it): its size is the
            // furthest range any segment of the playlist — selected or not — gives.
            var fileEnds: [String: Int64] = [:]
            func note(_ url: String, _ range: ByteRange?) {
                guard let range else { return }
                fileEnds[url] = max(fileEnds[url] ?? 0, Int64(range.offset + range.length))
            }
            for segment in playlist.segments {
                note(segment.url, segment.byteRange)
                if let map = segment.map { note(map.url, map.byteRange) }
            }
            var rangeFiles: [String: Int64] = [:]
            var allRanges = !segments.isEmpty
            func add(_ string: String, _ kind: CacheObjectKind, range: ByteRange?, keyMethod: String? = nil) throws(DownloadError) {
                let url: OriginURL
                do { url = try OriginURL(string) } catch { throw DownloadError.corrupted.with("cannot fetch \(string): \(error)") }
                let key = CacheKey(url, volatileParameters: volatileParameters)
                if let slicing, let range, let fileEnd = fileEnds[string], slicing.isSliced(total: fileEnd) {
                    // A large file: only the slices this range covers (the file may be longer than the playlist tells;
                    // a slice's real length comes with its answer).
                    let first = Int64(range.offset)
                    for index in slicing.index(of: first)...slicing.index(of: first + max(1, Int64(range.length)) - 1) {
                        let sliceKey = slicing.key(of: key, slice: index)
                        guard seen.insert(sliceKey).inserted else { continue }
                        let bytes = slicing.bytes(of: index, total: fileEnd)
                        rangeFiles[sliceKey.value] = bytes.last - bytes.first + 1
                        var resource = PlannedResource(url: url, key: sliceKey, kind: .segment, knownLength: bytes.last - bytes.first + 1)
                        resource.slice = PlannedResource.Slice(objectKey: key, index: index, layout: slicing)
                        media.append(resource)
                    }
                    return
                }
                let end = range.map { Int64($0.offset + $0.length) }.map { max($0, fileEnds[string] ?? 0) }
                if let index = indexByKey[key] {
                    // One file addressed by several ranges: stored whole, once; remember the furthest end. A
                    // single-file fMP4 holds its init section and its segments: it counts as a segment.
                    if let end, let known = media[index].knownLength, end > known { media[index].knownLength = end }
                    if kind == .segment { media[index].kind = .segment }
                    return
                }
                guard seen.insert(key).inserted else { return }
                if let end { rangeFiles[key.value] = end }  // counted by the rendition that adds it
                indexByKey[key] = media.count
                var resource = PlannedResource(url: url, key: key, kind: kind, knownLength: end)
                resource.keyMethod = keyMethod
                media.append(resource)
            }
            for segment in segments {
                for key in segment.keys where key.isFetchable {
                    if let url = key.url { try add(url, .key, range: nil, keyMethod: key.method.name) }
                }
                if let map = segment.map { try add(map.url, .initSection, range: map.byteRange) }
                try add(segment.url, .segment, range: segment.byteRange)
                if let key = segment.key, key.method == .aes128, let keyURL = key.url.flatMap({ try? OriginURL($0) }),
                    let iv = segment.aes128IV, let segmentURL = try? OriginURL(segment.url),
                    let index = indexByKey[CacheKey(segmentURL, volatileParameters: volatileParameters)]
                {
                    let range = segment.byteRange.map { (offset: Int64($0.offset), length: Int64($0.length)) }
                    media[index].encryptions.append(PlannedResource.Encryption(keyURL: keyURL, iv: iv, range: range))
                }
                if segment.byteRange == nil { allRanges = false }
            }
            let estimate: Int64?
            if allRanges {
                estimate = rangeFiles.values.reduce(0, +)
            } else if let bandwidth = selected.bandwidth {
                estimate = Int64(Double(bandwidth) * duration / 8)
            } else {
                estimate = nil
            }
            planned.append(PlannedRendition(selected: selected, segmentCount: segments.count, duration: duration, estimatedBytes: estimate))
        }
        return DownloadPlan(renditions: planned, playlists: plannedPlaylists, media: media, isPartial: isPartial)
    }
}

/// A chosen media playlist in a plan.
package struct PlannedRendition: Sendable, Hashable {
    package var selected: SelectedPlaylist
    /// Segments selected from it.
    package var segmentCount: Int
    /// Seconds of media selected from it.
    package var duration: Double
    /// Its share of the estimate, if anything tells.
    package var estimatedBytes: Int64?
}
