import Foundation
import HLSProxy

/// `GET /api/v1/stats`: what the console plots — the last hour of traffic (per minute, cache against origin),
/// the disk used against the cap, and the items by state.
extension AdminAPI {
    package func attach(to metrics: ProxyMetrics) {
        attachTraffic { metrics.traffic }
    }

    func stats() throws -> Reply {
        sampleTraffic()
        let series = trafficSeries()
        var hour = TrafficTotals()
        for sample in series { hour.add(sample.served) }
        let usage = try store.usage()
        var cache: [String: Any] = ["bytes": usage.bytes, "objects": usage.count, "maxBytes": store.maxBytes]
        if let free = store.freeDiskBytes() { cache["diskFreeBytes"] = free }
        let object: [String: Any] = [
            "intervalSeconds": 60,
            "traffic": series.map { sample -> [String: Any] in
                var entry = Self.json(sample.served)
                entry["start"] = AdminJSON.iso(sample.start)
                return entry
            },
            "lastHour": Self.json(hour),
            "cache": cache,
            "items": try items.countsByState().filter { $0.value > 0 },
        ]
        return Reply(status: .ok, json: AdminJSON.string(object))
    }

    private static func json(_ totals: TrafficTotals) -> [String: Any] {
        [
            "bytesFromCache": totals.bytesFromCache, "bytesFromOrigin": totals.bytesFromOrigin,
            "requestsFromCache": totals.requestsFromCache, "requestsFromOrigin": totals.requestsFromOrigin,
            "hitRatio": totals.hitRatio,
        ]
    }
}
