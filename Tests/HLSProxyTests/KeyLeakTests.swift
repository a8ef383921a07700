import Foundation
import HLSCrypto
import HLSKeys
import HLSTestSupport
import Logging
import NIOConcurrencyHelpers
import Testing

@testable import HLSProxy

/// No plaintext AES-128 key anywhere it could be read later (docs/threat-model.md, "Keys"): not in any file
/// under the cache directory (object files, `keys.sqlite` and `index.sqlite` with their WAL and SHM files,
/// temp files) in raw, hex or base64 form, and not in the log at trace level, after the proxy fetched and served
/// the key and after `fetch` prewarmed it. Origin credentials stay out of the log too.
@Suite(.serialized) struct KeyLeakTests {
    static let key: [UInt8] = [0x3C, 0x91, 0x07, 0xE2, 0x5A, 0xB8, 0x44, 0x19, 0xF0, 0x6D, 0x2B, 0x83, 0xC7, 0x11, 0x9E, 0x55]

    /// The forms a leaked key would take.
    static var needles: [(String, [UInt8])] {
        let hex = key.map { String(format: "%02x", $0) }.joined()
        return [
            ("raw", key), ("hex", Array(hex.utf8)), ("HEX", Array(hex.uppercased().utf8)),
            ("base64", Array(Data(key).base64EncodedString().utf8)), ("0x-hex", Array(("0x" + hex).utf8)),
        ]
    }

    /// A one-segment AES-128 stream: the segment is really encrypted so `fetch` can verify it.
    static func fixture() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-keyleak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let plain = randomBytes(64 << 10)
        let iv = [UInt8](repeating: 0, count: 15) + [1]
        try Data(try AES128CBC.encrypt(plain, key: key, iv: iv)).write(to: dir.appendingPathComponent("seg.ts"))
        try Data(key).write(to: dir.appendingPathComponent("secret.key"))
        let playlist = """
            #EXTM3U
            #EXT-X-TARGETDURATION:4
            #EXT-X-MEDIA-SEQUENCE:1
            #EXT-X-KEY:METHOD=AES-128,URI="secret.key"
            #EXTINF:4.0,
            seg.ts
            #EXT-X-ENDLIST

            """
        try Data(playlist.utf8).write(to: dir.appendingPathComponent("enc.m3u8"))
        return dir
    }

    /// Every file under `directory` that contains one of the needles, with the form found.
    static func leaks(under directory: URL) -> [String] {
        var found: [String] = []
        guard let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil) else { return ["cannot list"] }
        for case let file as URL in files {
            guard let data = try? Data(contentsOf: file) else { continue }
            let bytes = [UInt8](data)
            for (form, needle) in needles where bytes.containsSubsequence(needle) {
                found.append("\(file.lastPathComponent) (\(form))")
            }
        }
        return found
    }

    /// The log lines that contain the key in some form, with the form.
    static func leaks(inLog lines: [String]) -> [String] {
        lines.flatMap { line in
            let bytes = Array(line.utf8)
            return needles.filter { bytes.containsSubsequence($0.1) }.map { "\($0.0): \(line.prefix(300))" }
        }
    }

    @Test func proxyKeepsNoPlaintextKeyOnDiskOrInTraceLogs() async throws {
        let dir = try Self.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let capture = KeyLeakLogCapture()
        var logger = Logger(label: "hlscache-keyleak") { _ in capture }
        logger.logLevel = .trace
        let harness = try await ProxyHarness.start(
            serving: dir, configureOrigin: { $0.originHeaders["127.0.0.1"] = [("X-Token", "s3cr3t-origin-token")] }, logger: logger)
        let playlist = try await harness.get(harness.url("/enc.m3u8"))
        let path = try #require(KeyServingTests.keyPaths(playlist.text).first)
        for _ in 0..<3 {
            let served = try await harness.get(harness.base + path)
            #expect(sameBytes(served.body, Self.key))
        }
        // The key by its origin URL is redirected to /keys/, never cached as a plain object.
        let direct = try await harness.get(harness.url("/secret.key"))
        #expect(direct.status == 307)
        let segment = try await harness.get(harness.url("/seg.ts"))
        #expect(segment.status == 200)
        try await harness.waitForIdle()

        #expect(capture.lines.count > 5, "the capture saw the trace log")
        #expect(Self.leaks(inLog: capture.lines).isEmpty, "key in the log: \(Self.leaks(inLog: capture.lines))")
        #expect(
            harness.origin.requests(matching: "/secret.key").allSatisfy { $0.headers.contains { $0 == ("X-Token", "s3cr3t-origin-token") } }
        )
        #expect(!capture.lines.contains { $0.contains("s3cr3t-origin-token") }, "an origin credential is in the log")
        // While the databases are open, so their WAL and SHM files are scanned too.
        let walFiles = try FileManager.default.contentsOfDirectory(atPath: harness.cacheDirectory.path).filter { $0.hasSuffix("-wal") }
        #expect(!walFiles.isEmpty, "the scan includes the WAL files")
        #expect(Self.leaks(under: harness.cacheDirectory).isEmpty, "\(Self.leaks(under: harness.cacheDirectory))")
        await harness.shutdown()
    }

    @Test func prewarmKeepsNoPlaintextKeyOnDiskOrInTraceLogs() async throws {
        let dir = try Self.fixture()
        defer { try? FileManager.default.removeItem(at: dir) }
        let origin = TestOrigin(root: dir)
        try await origin.start()
        let capture = KeyLeakLogCapture()
        var logger = Logger(label: "hlscache-keyleak-fetch") { _ in capture }
        logger.logLevel = .trace
        let fetch = try DownloaderHarness(origin: origin, logger: logger)
        let item = try await fetch.fetch("/enc.m3u8")
        #expect(item.state == .cached)
        #expect(origin.requests(matching: "/secret.key").count == 1)
        #expect(try fetch.stored("/secret.key") == nil, "the key is in the plain object store")
        let id = KeyID(try fetch.key("/secret.key"))
        #expect(try fetch.keys.storedKey(id) == Self.key, "the key is in the sealed store")
        #expect(capture.lines.count > 2)
        #expect(Self.leaks(inLog: capture.lines).isEmpty, "key in the log: \(Self.leaks(inLog: capture.lines))")
        #expect(Self.leaks(under: fetch.cacheDirectory).isEmpty, "\(Self.leaks(under: fetch.cacheDirectory))")
        await fetch.shutdown()
        await origin.stop()
    }
}

/// A log handler that keeps every formatted line (message and metadata), for tests that look at what is logged.
final class KeyLeakLogCapture: LogHandler, @unchecked Sendable {
    private let storage = NIOLockedValueBox<[String]>([])
    private let metadataBox = NIOLockedValueBox<Logger.Metadata>([:])
    private let levelBox = NIOLockedValueBox<Logger.Level>(.trace)

    var lines: [String] { storage.withLockedValue { $0 } }

    var metadata: Logger.Metadata {
        get { metadataBox.withLockedValue { $0 } }
        set { metadataBox.withLockedValue { $0 = newValue } }
    }

    var logLevel: Logger.Level {
        get { levelBox.withLockedValue { $0 } }
        set { levelBox.withLockedValue { $0 = newValue } }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        let text = "\(event.level) \(event.message) \(merged) \(event.error.map { "\($0)" } ?? "") \(event.source) \(event.function)"
        storage.withLockedValue { $0.append(text) }
    }
}
