import Foundation
import HLSCacheCore
import HLSDownloader
import NIOCore

/// The JSON shapes of the API (docs/openapi.yaml): objects built as dictionaries and written with sorted keys.
enum AdminJSON {
    static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    static func string(_ object: Any) -> String {
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }

    static func buffer(_ object: Any) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeString(string(object))
        buffer.writeString("\n")
        return buffer
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
    static func item(_ item: DownloadItem, consumption: ItemConsumption?, offline: OfflineStatus) -> [String: Any] {
        var object: [String: Any] = [
            "id": item.id, "url": item.url, "state": item.state.rawValue, "seconds": item.precacheSeconds,
            "locked": item.locked, "bytesDone": item.bytesDone, "bytesTotal": item.bytesTotal,
            "segmentsDone": item.segmentsDone, "segmentsTotal": item.segmentsTotal, "renditions": item.renditions,
            "percent": percent(bytes: item.bytesDone, bytesTotal: item.bytesTotal, segments: item.segmentsDone, segmentsTotal: item.segmentsTotal),
            "headers": item.headers.map(\.name), "createdAt": iso(item.createdAt), "updatedAt": iso(item.updatedAt),
        ]
        if let expires = item.expiresAt { object["expiresAt"] = iso(expires) }
        if let through = item.through { object["through"] = through }
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
            object["consumption"] = [
                "lastPlayedAt": iso(consumption.lastPlayedAt), "served": consumption.served,
                "servedSeconds": (consumption.servedSeconds * 1000).rounded() / 1000,
            ] as [String: Any]
        }
        return object
    }
}
