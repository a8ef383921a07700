import Foundation
import HLSCacheCore
import HLSDownloader
import NIOCore

/// The JSON shapes of the API (docs/openapi.yaml): objects built as dictionaries and written with sorted keys.
enum AdminJSON {
    /// With milliseconds (`2026-11-28T17:18:00.123Z`), written without a formatter object (docs/benchmarks.md,
    /// "listing 10,000 items": making a formatter per date cost more than the page).
    static func iso(_ date: Date) -> String {
        ISO8601Text.format(epochSeconds: date.timeIntervalSince1970, fractionalSeconds: true)
    }

    /// `object` as compact JSON with sorted keys (slashes not escaped).
    ///
    /// Written here rather than by `JSONSerialization` with `.sortedKeys`, which on Linux sorts every object's keys
    /// with a locale-aware string comparison (ICU): three quarters of the time a listing page of 100 items took
    /// (docs/benchmarks.md, "listing 10,000 items").
    static func string(_ object: Any) -> String {
        var out = ""
        out.reserveCapacity(256)
        write(object, into: &out)
        return out
    }

    private static func write(_ value: Any, into out: inout String) {
        switch value {
        case let text as String:
            JSONText.appendString(text, to: &out)
        case let flag as Bool where type(of: value) == Bool.self:
            out += flag ? "true" : "false"
        case let number as Double where type(of: value) == Double.self:
            if number.isFinite, number.rounded() == number, abs(number) < 1e15 {
                out += String(Int64(number))
            } else if number.isFinite {
                out += "\(number)"
            } else {
                out += "null"
            }
        case _ where type(of: value) is NSNumber.Type:
            // Parsed JSON (the caller's `meta`): JSONSerialization tells a boolean from a number.
            writeFoundation(value, into: &out)
        case let number as any BinaryInteger:
            out += "\(number)"
        case let object as [String: Any]:
            out += "{"
            var first = true
            for key in object.keys.sorted() {
                if !first { out += "," }
                first = false
                JSONText.appendString(key, to: &out)
                out += ":"
                write(object[key]!, into: &out)
            }
            out += "}"
        case let list as [Any]:
            out += "["
            for (index, element) in list.enumerated() {
                if index > 0 { out += "," }
                write(element, into: &out)
            }
            out += "]"
        case is NSNull:
            out += "null"
        default:
            writeFoundation(value, into: &out)
        }
    }

    /// Anything else JSON can hold (an NSNumber, a Float), as JSONSerialization writes it.
    private static func writeFoundation(_ value: Any, into out: inout String) {
        if let data = try? JSONSerialization.data(withJSONObject: [value], options: [.withoutEscapingSlashes]) {
            out += String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
        } else {
            out += "null"
        }
    }

    static func buffer(_ object: Any) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeString(string(object))
        buffer.writeString("\n")
        return buffer
    }

    /// A dry-run estimate (`POST /items` with `"dryRun": true`), as `fetch --dry-run --json` prints it.
    static func plan(_ plan: DownloadPlan, item: DownloadItem, refusal: DownloadError?) -> [String: Any] {
        var object: [String: Any] = [
            "dryRun": true, "url": item.url, "seconds": item.precacheSeconds, "partial": plan.isPartial,
            "resources": plan.resources.count, "segments": plan.segmentCount, "notes": plan.notes,
            "renditions": plan.renditions.map { rendition -> [String: Any] in
                var r: [String: Any] = [
                    "url": rendition.selected.url, "role": rendition.selected.role.rawValue, "segments": rendition.segmentCount,
                    "duration": (rendition.duration * 1000).rounded() / 1000,
                ]
                if let b = rendition.selected.bandwidth { r["bandwidth"] = b }
                if let e = rendition.estimatedBytes { r["estimatedBytes"] = e }
                if let n = rendition.selected.name { r["name"] = n }
                if let l = rendition.selected.language { r["language"] = l }
                return r
            },
            "fits": refusal == nil,
        ]
        if let url = try? OriginURL(item.url) { object["proxyPath"] = url.proxyPath }
        if let estimate = plan.estimatedBytes { object["estimatedBytes"] = estimate }
        if let refusal {
            object["error"] = refusal.code
            object["message"] = refusal.message
        }
        return object
    }

    /// One of an item's keys (never its bytes or URL).
    static func key(_ status: ItemKeyStatus) -> [String: Any] {
        var object: [String: Any] = ["id": status.id, "host": status.host, "state": status.state.rawValue]
        if let expires = status.expiresAt { object["expiresAt"] = iso(expires) }
        return object
    }

    /// How much of one rendition is stored, seconds to the millisecond.
    static func storage(_ storage: RenditionStorage) -> [String: Any] {
        func ms(_ seconds: Double) -> Double { (seconds * 1000).rounded() / 1000 }
        return [
            "url": storage.url, "seconds": ms(storage.seconds), "storedSeconds": ms(storage.storedSeconds),
            "storedFromStart": ms(storage.storedFromStart),
        ]
    }

    /// Progress in percent: segments when known, else bytes; 100 for a finished item with nothing to do.
    static func percent(bytes: Int64, bytesTotal: Int64, segments: Int, segmentsTotal: Int) -> Double {
        let value: Double
        if segmentsTotal > 0 {
            value = Double(segments) / Double(segmentsTotal) * 100
        } else if bytesTotal > 0 {
            value = Double(bytes) / Double(bytesTotal) * 100
        } else {
            value = 0
        }
        return (min(100, max(0, value)) * 10).rounded() / 10
    }

    /// An item. Header values are never shown (they may carry credentials), only their names.
    /// `bytesPerSecond` (whole bytes) and `etaSeconds` (whole seconds, rounded up), `null` when unknown.
    static func speed(bytesPerSecond: Double?, etaSeconds: Double?) -> [String: Any] {
        [
            "bytesPerSecond": bytesPerSecond.map { Int64($0.rounded()) } ?? NSNull(),
            "etaSeconds": etaSeconds.map { Int64($0.rounded(.up)) } ?? NSNull(),
        ]
    }

    static func item(_ item: DownloadItem, consumption: ItemConsumption?, offline: OfflineStatus) -> [String: Any] {
        var object: [String: Any] = [
            "id": item.id, "url": item.url, "state": item.state.rawValue, "seconds": item.precacheSeconds,
            "locked": item.locked, "bytesDone": item.bytesDone, "bytesTotal": item.bytesTotal,
            "segmentsDone": item.segmentsDone, "segmentsTotal": item.segmentsTotal, "renditions": item.renditions,
            "percent": percent(
                bytes: item.bytesDone, bytesTotal: item.bytesTotal, segments: item.segmentsDone, segmentsTotal: item.segmentsTotal),
            "headers": item.headers.map(\.name), "createdAt": iso(item.createdAt), "updatedAt": iso(item.updatedAt),
        ]
        if let expires = item.expiresAt { object["expiresAt"] = iso(expires) }
        let speed = item.speed()
        object.merge(Self.speed(bytesPerSecond: speed.bytesPerSecond, etaSeconds: speed.etaSeconds)) { $1 }
        if let through = item.through { object["through"] = through }
        if let record = item.record { object["record"] = record.summary(segments: item.segmentsDone) }
        object["tags"] = item.tags
        if let title = item.title { object["title"] = title }
        if let poster = item.posterURL { object["posterURL"] = poster }
        // A poster that could not be stored: its reason instead of a path that would not answer.
        if let error = item.posterError {
            object["posterError"] = error
        } else if let path = ItemMetadata.posterPath(of: item) {
            object["posterPath"] = path
        }
        if let meta = item.metadata, let value = try? JSONSerialization.jsonObject(with: Data(meta.utf8)) { object["meta"] = value }
        if let maxBytes = item.maxBytes { object["maxSize"] = maxBytes }
        if let window = item.downloadWindow { object["window"] = window.description }
        if let daily = item.dailyBytes { object["dailyLimit"] = daily }
        object["playableOffline"] = offline.playable
        if let rate = item.rateLimit { object["rate"] = rate }
        if let until = offline.until { object["offlineUntil"] = iso(until) }
        if item.missingResources > 0 { object["missingResources"] = item.missingResources }
        if let started = item.startedAt { object["startedAt"] = iso(started) }
        if let completed = item.completedAt { object["completedAt"] = iso(completed) }
        if let since = item.interruptedAt { object["interruptedAt"] = iso(since) }
        if let next = item.nextAttemptAt { object["nextAttemptAt"] = iso(next) }
        if let code = item.errorCode { object["error"] = code }
        if let message = item.errorMessage { object["message"] = message }
        if let url = try? OriginURL(item.url) { object["proxyPath"] = url.proxyPath }
        object["playbackPath"] = DownloadItem.playbackPath(of: item.id, offline: false)
        object["offlinePlaybackPath"] = DownloadItem.playbackPath(of: item.id, offline: true)
        if let consumption {
            object["consumption"] =
                [
                    "lastPlayedAt": iso(consumption.lastPlayedAt), "served": consumption.served,
                    "servedSeconds": (consumption.servedSeconds * 1000).rounded() / 1000,
                ] as [String: Any]
        }
        return object
    }
}
