import Foundation
import HLSCacheCore
import HLSCacheStore
import HLSTestSupport
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import HLSProxy

/// One sample of the Prometheus text format: `name{label="value",…} 12`.
struct PrometheusSample: Sendable {
    var name: String
    var labels: [String: String]
    var value: Double
}

/// A strict-enough parser of the Prometheus text exposition format for the tests: every line is a comment
/// (`# HELP`, `# TYPE`) or a sample; anything else fails the parse.
enum PrometheusText {
    struct ParseError: Error, CustomStringConvertible {
        var line: String
        var description: String { "not a Prometheus sample: \(line)" }
    }

    static func parse(_ text: String) throws -> (samples: [PrometheusSample], types: [String: String]) {
        var samples: [PrometheusSample] = []
        var types: [String: String] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                guard parts.count == 4 else { throw ParseError(line: String(line)) }
                types[String(parts[2])] = String(parts[3])
                continue
            }
            if line.hasPrefix("#") { continue }
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                throw ParseError(line: String(line))
            }
            let series = line[..<space]
            var labels: [String: String] = [:]
            let name: Substring
            if let brace = series.firstIndex(of: "{") {
                guard series.last == "}" else { throw ParseError(line: String(line)) }
                name = series[..<brace]
                var rest = series[series.index(after: brace)..<series.index(before: series.endIndex)]
                while !rest.isEmpty {
                    guard let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)] == "\"" else {
                        throw ParseError(line: String(line))
                    }
                    let key = String(rest[..<equals])
                    var cursor = rest.index(equals, offsetBy: 2)
                    var value = ""
                    while cursor < rest.endIndex && rest[cursor] != "\"" {
                        if rest[cursor] == "\\" { cursor = rest.index(after: cursor) }
                        value.append(rest[cursor])
                        cursor = rest.index(after: cursor)
                    }
                    guard cursor < rest.endIndex else { throw ParseError(line: String(line)) }
                    labels[key] = value
                    rest = rest[rest.index(after: cursor)...]
                    if rest.first == "," { rest = rest.dropFirst() }
                }
            } else {
                name = series
            }
            guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == ":" }) else {
                throw ParseError(line: String(line))
            }
            samples.append(PrometheusSample(name: String(name), labels: labels, value: value))
        }
        return (samples, types)
    }
}

extension Array where Element == PrometheusSample {
    /// The value of the one sample with this name and these labels (all of them), or nil.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        first { $0.name == name && $0.labels == labels }?.value
    }
}

/// Collects log lines written by a ``JSONLogHandler`` in a test.
final class LogCapture: Sendable {
    private let lines = NIOLockedValueBox<[String]>([])

    func logger(label: String, level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: label) { label in
            JSONLogHandler(label: label, stream: .custom { line in self.lines.withLockedValue { $0.append(line) } })
        }
        logger.logLevel = level
        return logger
    }

    var captured: [String] { lines.withLockedValue { $0 } }

    /// Every captured line parsed as a JSON object (a line that does not parse fails the test).
    func objects() throws -> [[String: Any]] {
        try captured.map { line in
            #expect(line.hasSuffix("\n") && line.dropLast().firstIndex(of: "\n") == nil, "one line per record: \(line)")
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
            return try #require(object as? [String: Any], "a JSON object: \(line)")
        }
    }
}

@Suite struct MetricsTests {
    /// A VOD playlist and two segments on the test origin.
    static func originDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-metrics-origin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let playlist = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg0.ts\n#EXTINF:2.0,\nseg1.ts\n#EXT-X-ENDLIST\n"
        try Data(playlist.utf8).write(to: dir.appendingPathComponent("media.m3u8"))
        try Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }).write(to: dir.appendingPathComponent("seg0.ts"))
        try Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: dir.appendingPathComponent("seg1.ts"))
        return dir
    }

    @Test func countersMoveByExactlyTheTrafficSent() async throws {
        let dir = try Self.originDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let harness = try await ProxyHarness.start(serving: dir, configure: { $0.prefetchSegments = 0 }) { origin in
            origin.retry.maxRetries = 0
        }
        // Reserved, not a stopped server's port: in a parallel run another test's server was given that one and
        // answered 404.
        let down = try ReservedPort()

        let miss = try await harness.get(harness.url("/seg0.ts?token=secret"))
        #expect(miss.status == 200 && miss.headers.first(name: "X-Cache") == "MISS")
        try await harness.waitForIdle()
        let hit = try await harness.get(harness.url("/seg0.ts"))
        #expect(hit.status == 200 && hit.headers.first(name: "X-Cache") == "HIT")
        let playlist = try await harness.get(harness.url("/media.m3u8"))
        #expect(playlist.status == 200)
        let notFound = try await harness.get(harness.url("/missing.ts"))
        #expect(notFound.status == 404)
        let unreachable = try await harness.get("\(harness.base)/http/127.0.0.1:\(down.port)/seg0.ts")
        #expect(unreachable.status == 502)
        try await harness.waitForIdle()
        withExtendedLifetime(down) {}

        let scrape = try await harness.get(harness.base + "/metrics")
        #expect(scrape.status == 200)
        #expect(scrape.headers.first(name: "Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        let (samples, types) = try PrometheusText.parse(scrape.text)

        let requests = "hlscache_http_requests_total"
        #expect(types[requests] == "counter")
        #expect(samples.value(requests, ["route": "segment", "status": "200"]) == 2)
        #expect(samples.value(requests, ["route": "playlist", "status": "200"]) == 1)
        #expect(samples.value(requests, ["route": "segment", "status": "404"]) == 1)
        #expect(samples.value(requests, ["route": "segment", "status": "502"]) == 1)
        let total = samples.filter { $0.name == requests }.reduce(0) { $0 + $1.value }
        #expect(total == 5, "the scrape itself is counted after it is answered")

        #expect(samples.value("hlscache_cache_requests_total", ["result": "hit"]) == 1)
        #expect(samples.value("hlscache_cache_requests_total", ["result": "miss"]) == 4)
        #expect(samples.value("hlscache_cache_requests_total", ["result": "coalesced"]) == 0)
        #expect(samples.value("hlscache_served_bytes_total", ["source": "disk"]) == Double(hit.body.count))
        #expect(samples.value("hlscache_served_bytes_total", ["source": "origin"]) == Double(miss.body.count + playlist.body.count))

        // Three origin answers (the segment, the playlist, the 404); the dead origin never answered.
        let histogram = "hlscache_origin_response_seconds"
        #expect(types[histogram] == "histogram")
        #expect(samples.value(histogram + "_count") == 3)
        let buckets = samples.filter { $0.name == histogram + "_bucket" }
        #expect(buckets.count == ProxyMetrics.latencyBuckets.count + 1)
        #expect(buckets.first { $0.labels["le"] == "+Inf" }?.value == 3)
        #expect(samples.value("hlscache_origin_errors_total", ["code": "notFound"]) == 1)
        #expect(samples.value("hlscache_origin_errors_total", ["code": "network"]) == 1)
        #expect(samples.filter { $0.name == "hlscache_origin_errors_total" }.reduce(0) { $0 + $1.value } == 2)

        // Scrape-time gauges.
        let usage = try harness.store.usage()
        #expect(samples.value("hlscache_cache_used_bytes") == Double(usage.bytes))
        #expect(samples.value("hlscache_cache_objects") == Double(usage.count))
        let memory = harness.server.services.memory.usage
        #expect(samples.value("hlscache_memory_tier_bytes") == Double(memory.bytes))
        #expect(samples.value("hlscache_memory_tier_objects") == Double(memory.count))
        #expect(samples.value("hlscache_memory_tier_capacity_bytes") == Double(harness.server.services.memory.maxBytes))
        #expect(harness.server.services.memory.maxBytes == MemoryTierSizing.machineDefault, "the harness runs on the default, auto")
        #expect(samples.value("hlscache_memory_large_sends") == 0)
        #expect(samples.value("hlscache_cache_capacity_bytes") == Double(harness.server.configuration.maxCacheBytes))
        #expect((samples.value("hlscache_active_connections") ?? 0) >= 1)
        #expect(samples.value("hlscache_key_fetches_total", ["result": "ok"]) == 0)

        // Bounded labels: never a URL, a host or a path.
        for sample in samples {
            for (key, value) in sample.labels {
                #expect(
                    !value.contains("/") && !value.contains("127.0.0.1") && !value.contains(".ts") && !value.contains(".m3u8"),
                    "\(sample.name) \(key)=\(value)")
            }
        }
        #expect(!scrape.text.contains("secret"))

        // The scrape was counted once it was answered.
        let again = try PrometheusText.parse(try await harness.get(harness.base + "/metrics").text).samples
        #expect(again.value(requests, ["route": "metrics", "status": "200"]) == 1)
        await harness.shutdown()
    }

    /// Requests counted by many event loops at once (more loops than shards: some share one) add up exactly, in the
    /// scrape and in the traffic totals, and each scrape adds only what was counted since the one before.
    @Test func countsFromManyLoopsAddUpOnceEachScrape() async throws {
        let metrics = ProxyMetrics()
        let loops = ShardedCounts.shards + 4
        let perLoop = 2_000
        await withTaskGroup(of: Void.self) { group in
            for loop in 0..<loops {
                group.addTask {
                    for index in 0..<perLoop {
                        metrics.record(route: .segment, status: 200, cache: index % 4 == 0 ? .miss : .hit, bytes: 100, shard: loop)
                        metrics.record(route: .playlist, status: 404, cache: .miss, bytes: 7, shard: loop)
                    }
                }
            }
        }
        func scrape() throws -> [PrometheusSample] { try PrometheusText.parse(String(decoding: metrics.emit(), as: UTF8.self)).samples }
        let requests = "hlscache_http_requests_total"
        let all = loops * perLoop
        for samples in [try scrape(), try scrape()] {
            #expect(samples.value(requests, ["route": "segment", "status": "200"]) == Double(all))
            #expect(samples.value(requests, ["route": "playlist", "status": "404"]) == Double(all))
            #expect(samples.value("hlscache_cache_requests_total", ["result": "hit"]) == Double(all * 3 / 4))
            #expect(samples.value("hlscache_cache_requests_total", ["result": "miss"]) == Double(all + all / 4))
            // Error bodies are not content.
            #expect(samples.value("hlscache_served_bytes_total", ["source": "disk"]) == Double(all * 3 / 4 * 100))
            #expect(samples.value("hlscache_served_bytes_total", ["source": "origin"]) == Double(all / 4 * 100))
        }
        #expect(
            metrics.traffic
                == TrafficTotals(
                    bytesFromCache: Int64(all * 3 / 4 * 100), bytesFromOrigin: Int64(all / 4 * 100), requestsFromCache: Int64(all * 3 / 4),
                    requestsFromOrigin: Int64(all + all / 4)))
        metrics.record(route: .segment, status: 200, cache: .hit, bytes: 5, shard: 3)
        let after = try scrape()
        #expect(after.value(requests, ["route": "segment", "status": "200"]) == Double(all + 1))
        #expect(after.value("hlscache_served_bytes_total", ["source": "disk"]) == Double(all * 3 / 4 * 100 + 5))
    }

    @Test func metricsCanBeTurnedOff() async throws {
        let dir = try Self.originDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let harness = try await ProxyHarness.start(serving: dir, configure: { $0.metricsEnabled = false })
        #expect(try await harness.get(harness.base + "/metrics").status == 404)
        #expect(try await harness.get(harness.base + "/healthz").status == 200)
        await harness.shutdown()
    }
}

@Suite struct ReadinessTests {
    @Test func readyUntilTheCacheDirectoryIsUnwritableOrTheStoreCloses() async throws {
        let dir = try MetricsTests.originDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let harness = try await ProxyHarness.start(serving: dir)
        let ready = try await harness.get(harness.base + "/readyz")
        #expect(ready.status == 200)
        #expect(ready.text.contains("\"ready\""))

        // Root ignores permissions: take the temp directory away and put a file in its place.
        let tmp = harness.cacheDirectory.appendingPathComponent("tmp")
        try FileManager.default.removeItem(at: tmp)
        try Data("not a directory".utf8).write(to: tmp)
        let unwritable = try await harness.get(harness.base + "/readyz")
        #expect(unwritable.status == 503)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(unwritable.body)) as? [String: Any])
        #expect(body["status"] as? String == "unavailable")
        #expect((body["reason"] as? String)?.contains("not writable") == true, "\(body)")
        #expect(try await harness.get(harness.base + "/healthz").status == 200, "liveness does not depend on the disk")

        try FileManager.default.removeItem(at: tmp)
        try FileManager.default.createDirectory(at: tmp, withIntermediateDirectories: false)
        #expect(try await harness.get(harness.base + "/readyz").status == 200)

        harness.store.close()
        let closed = try await harness.get(harness.base + "/readyz")
        #expect(closed.status == 503)
        #expect(closed.text.contains("closed"))
        await harness.shutdown()
    }
}

@Suite struct AccessLogTests {
    @Test func oneJSONLinePerRequestWithItsFields() async throws {
        let dir = try MetricsTests.originDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let capture = LogCapture()
        let harness = try await ProxyHarness.start(
            serving: dir, configure: { $0.prefetchSegments = 0 }, accessLogger: capture.logger(label: "hlscache.access"))
        let miss = try await harness.get(harness.url("/seg1.ts?token=secret"))
        try await harness.waitForIdle()
        let hit = try await harness.get(harness.url("/seg1.ts"))
        let head = try await harness.get(harness.url("/seg1.ts"), method: .HEAD)
        #expect(try await harness.get(harness.url("/missing.ts")).status == 404)
        #expect(try await harness.get(harness.base + "/healthz").status == 200)
        await harness.shutdown()

        let lines = try capture.objects()
        #expect(lines.count == 5, "\(capture.captured)")
        for line in lines {
            #expect(line["label"] as? String == "hlscache.access")
            #expect(line["level"] as? String == "info")
            let timestamp = try #require(line["timestamp"] as? String)
            #expect(
                ISO8601DateFormatter().date(from: timestamp.replacingOccurrences(of: #"\.\d{3}"#, with: "", options: .regularExpression))
                    != nil)
            #expect((line["message"] as? String)?.isEmpty == false)
        }
        let fields = lines.compactMap { $0["metadata"] as? [String: String] }
        #expect(fields.count == 5)
        guard fields.count == 5 else { return }
        #expect(fields[0]["method"] == "GET")
        #expect(fields[0]["path"] == "/http/127.0.0.1:\(harness.origin.port)/seg1.ts", "no query string: tokens stay out of logs")
        #expect(fields[0]["status"] == "200")
        #expect(fields[0]["cache"] == "miss")
        #expect(fields[0]["bytes"] == String(miss.body.count))
        #expect(fields[0]["remote"] == "127.0.0.1")
        #expect(fields[0]["complete"] == "true")
        #expect(Double(fields[0]["duration_ms"] ?? "") != nil)
        #expect(fields[1]["cache"] == "hit" && fields[1]["bytes"] == String(hit.body.count))
        #expect(fields[2]["method"] == "HEAD" && fields[2]["bytes"] == "0" && fields[2]["cache"] == "hit")
        #expect(head.status == 200)
        #expect(fields[3]["status"] == "404" && fields[3]["cache"] == "miss")
        #expect(fields[4]["path"] == "/healthz" && fields[4]["cache"] == "-")
        #expect(!capture.captured.joined().contains("secret"))
    }

    @Test func offWhenDisabled() async throws {
        let dir = try MetricsTests.originDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let capture = LogCapture()
        let harness = try await ProxyHarness.start(
            serving: dir, configure: { $0.accessLog = false }, accessLogger: capture.logger(label: "hlscache.access"))
        #expect(try await harness.get(harness.base + "/healthz").status == 200)
        await harness.shutdown()
        #expect(capture.captured.isEmpty)
    }

    @Test func jsonLinesEscapeEverything() throws {
        let capture = LogCapture()
        let logger = capture.logger(label: "hlscache \"test\"", level: .debug)
        let nasty = "quote \" backslash \\ newline \n tab \t bell \u{07} nul \u{00} del \u{7F} é 🎬 \u{2028}"
        logger.debug(
            "\(nasty)",
            metadata: ["key": .string(nasty), "n": .stringConvertible(42), "list": .array([.string("a"), .dictionary(["b": "c"])])])
        let objects = try capture.objects()
        #expect(objects.count == 1)
        let object = try #require(objects.first)
        #expect(object["message"] as? String == nasty)
        #expect(object["label"] as? String == "hlscache \"test\"")
        #expect(object["level"] as? String == "debug")
        let metadata = try #require(object["metadata"] as? [String: Any])
        #expect(metadata["key"] as? String == nasty)
        #expect(metadata["n"] as? String == "42")
        #expect((metadata["list"] as? [Any])?.count == 2)
        logger.trace("below the level")
        #expect(capture.captured.count == 1)
    }
}
