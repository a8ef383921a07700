import Logging
import NIOCore

/// One access-log line: `GET /https/cdn.example.com/v/seg1.ts 200 1048576 hit 1.2ms`, with the same fields as
/// metadata (`method`, `path`, `status`, `bytes`, `cache`, `duration_ms`, `remote`, `complete`) for the JSON
/// log format. The query string is left out: signed-URL tokens do not belong in logs.
struct AccessLogLine {
    var method: String
    var target: String
    var status: Int
    var bytes: Int64
    var cache: CacheResult
    var duration: TimeAmount
    var remote: String?
    var complete: Bool

    var path: Substring {
        target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? Substring(target)
    }

    /// Milliseconds with three decimals.
    var durationText: String {
        let micros = duration.nanoseconds / 1000
        let fraction = String(micros % 1000)
        return "\(micros / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }

    func write(to logger: Logger) {
        let path = String(self.path)
        let duration = durationText
        var metadata: Logger.Metadata = [
            "method": .string(method), "path": .string(path), "status": .stringConvertible(status), "bytes": .stringConvertible(bytes),
            "cache": .string(cache.label), "duration_ms": .string(duration), "complete": .stringConvertible(complete),
        ]
        if let remote { metadata["remote"] = .string(remote) }
        logger.info("\(method) \(path) \(status) \(bytes) \(cache.label) \(duration)ms\(complete ? "" : " incomplete")", metadata: metadata)
    }
}
