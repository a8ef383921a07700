import Foundation
import HLSCacheCore
import HLSDownloader
import HLSKeys

/// How items and progress are printed: one-line tables, JSON objects, the terminal progress line.
enum ItemFormatter {
    static func bytes(_ value: Int64) -> String {
        ByteSize(bytes: value).description
    }

    static func iso(_ date: Date?) -> String? {
        guard let date else { return nil }
        return ISO8601Text.format(epochSeconds: date.timeIntervalSince1970, fractionalSeconds: false)
    }

    /// The item as a JSON-ready dictionary (header values are not printed, only names).
    static func dictionary(_ item: DownloadItem, proxyBase: String? = nil, offline: OfflineStatus? = nil) -> [String: Any] {
        var object: [String: Any] = [
            "id": item.id, "url": item.url, "state": item.state.rawValue, "seconds": item.precacheSeconds,
            "locked": item.locked, "bytesDone": item.bytesDone, "bytesTotal": item.bytesTotal,
            "segmentsDone": item.segmentsDone, "segmentsTotal": item.segmentsTotal, "renditions": item.renditions,
            "headers": item.headers.map(\.name), "createdAt": iso(item.createdAt) ?? "", "updatedAt": iso(item.updatedAt) ?? "",
        ]
        if let expires = iso(item.expiresAt) { object["expiresAt"] = expires }
        let speed = item.speed()
        object["bytesPerSecond"] = speed.bytesPerSecond.map { Int64($0.rounded()) } ?? NSNull()
        object["etaSeconds"] = speed.etaSeconds.map { Int64($0.rounded(.up)) } ?? NSNull()
        if let title = item.title { object["title"] = title }
        if !item.tags.isEmpty { object["tags"] = item.tags }
        if let poster = item.posterURL { object["posterURL"] = poster }
        if let error = item.posterError { object["posterError"] = error }
        if let meta = item.metadata, let value = try? JSONSerialization.jsonObject(with: Data(meta.utf8)) { object["meta"] = value }
        if let maxBytes = item.maxBytes { object["maxSize"] = maxBytes }
        if let window = item.downloadWindow { object["window"] = window.description }
        if let daily = item.dailyBytes { object["dailyLimit"] = daily }
        if let offline {
            object["playableOffline"] = offline.playable
            if let until = iso(offline.until) { object["offlineUntil"] = until }
        }
        if item.missingResources > 0 { object["missingResources"] = item.missingResources }
        if let rate = item.rateLimit { object["rate"] = rate }
        if let through = item.through { object["through"] = through }
        if let record = item.record { object["record"] = record.summary(segments: item.segmentsDone) }
        if let started = iso(item.startedAt) { object["startedAt"] = started }
        if let completed = iso(item.completedAt) { object["completedAt"] = completed }
        if let since = iso(item.interruptedAt) { object["interruptedAt"] = since }
        if let next = iso(item.nextAttemptAt) { object["nextAttemptAt"] = next }
        if let code = item.errorCode { object["error"] = code }
        if let message = item.errorMessage { object["message"] = message }
        if let base = proxyBase, let url = try? OriginURL(item.url) { object["proxyURL"] = url.proxyURL(base: base) }
        if let base = proxyBase {
            // Served by `hlscache serve` (its admin API): only the item's renditions; the offline form stops after the stored part.
            object["playbackURL"] = Self.joined(base, DownloadItem.playbackPath(of: item.id, offline: false))
            object["offlinePlaybackURL"] = Self.joined(base, DownloadItem.playbackPath(of: item.id, offline: true))
        }
        return object
    }

    /// `base` (`http://host:port`, perhaps with a trailing slash) followed by an absolute `path`.
    static func joined(_ base: String, _ path: String) -> String {
        (base.hasSuffix("/") ? String(base.dropLast()) : base) + path
    }

    /// An item's key as JSON: id, host, state, expiresAt.
    static func dictionary(_ key: ItemKeyStatus) -> [String: Any] {
        var object: [String: Any] = ["id": key.id, "host": key.host, "state": key.state.rawValue]
        if let expires = iso(key.expiresAt) { object["expiresAt"] = expires }
        return object
    }

    /// `3f2a…  cdn.example.com  valid until 2026-11-29T10:00:00Z`.
    static func line(_ key: ItemKeyStatus) -> String {
        var line = "\(key.id)  \(key.host)  \(key.state.rawValue)"
        if let expires = iso(key.expiresAt) { line += key.state == .expired ? " since \(expires)" : " until \(expires)" }
        return line
    }

    static func json(_ object: [String: Any]) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// `12.0 MiB / 40.0 MiB  5/20 segments  1.2 MiB/s  ETA 23s`.
    static func progressLine(_ progress: DownloadProgress) -> String {
        var line =
            "\(bytes(progress.bytesDone)) / \(bytes(progress.bytesTotal))  \(progress.segmentsDone)/\(progress.segmentsTotal) segments"
        if let rate = progress.bytesPerSecond { line += "  \(bytes(Int64(rate)))/s" }
        if let eta = progress.eta { line += "  ETA \(Int(eta.rounded()))s" }
        return line
    }

    static func progressJSON(id: String, _ progress: DownloadProgress) -> String {
        var object: [String: Any] = [
            "event": "progress", "id": id, "bytesDone": progress.bytesDone, "bytesTotal": progress.bytesTotal,
            "segmentsDone": progress.segmentsDone, "segmentsTotal": progress.segmentsTotal,
            "bytesPerSecond": progress.bytesPerSecond.map { Int64($0) } ?? NSNull(),
        ]
        if let eta = progress.eta { object["eta"] = Int(eta.rounded()) }
        return json(object)
    }

    /// Parses `7d`, `12h`, `30m`, `45s`, `2w` (or a bare number of seconds).
    static func duration(_ text: String) -> TimeInterval? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800]
        guard let last = text.last else { return nil }
        if let unit = units[last], let value = Double(text.dropLast()), value > 0 { return value * unit }
        if let value = Double(text), value > 0 { return value }
        return nil
    }
}
