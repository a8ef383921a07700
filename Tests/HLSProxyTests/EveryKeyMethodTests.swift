import Foundation
import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSOrigin
import HLSTestSupport
import Testing

@testable import HLSProxy

/// Keys of every method (issue 31): an `http(s)` key URI in the identity key format goes through `/keys/` whatever
/// its METHOD, is stored sealed and prewarmed by `fetch`; licence servers (another KEYFORMAT), `skd://` and `data:`
/// stay as written.
@Suite struct EveryKeyMethodTests {
    static func randomKey(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }

    static let methods: [(method: String, size: Int, path: String)] = [
        ("SAMPLE-AES", 16, "/k/sample.key"), ("SAMPLE-AES-CTR", 16, "/k/cbcs.key"), ("AES-256", 32, "/k/aes256.key"),
        ("AES-256-CTR", 32, "/k/aes256ctr.key"),
    ]

    static func playlist(port: Int) -> (text: String, untouched: [String]) {
        let untouched = [
            "#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI=\"https://licence.example/widevine\",KEYFORMAT=\"urn:uuid:edef8ba9-79d6-4ace-a3c8-27dcd51d21ed\"",
            "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://asset-1\",KEYFORMAT=\"com.apple.streamingkeydelivery\"",
            "#EXT-X-KEY:METHOD=AES-128,URI=\"data:text/plain;base64,AAECAwQFBgcICQoLDA0ODw==\"",
        ]
        var lines = ["#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD"]
        for (index, entry) in methods.enumerated() {
            let uri = index % 2 == 0 ? "http://127.0.0.1:\(port)\(entry.path)" : String(entry.path.dropFirst())
            lines += ["#EXT-X-KEY:METHOD=\(entry.method),URI=\"\(uri)\",KEYFORMAT=\"identity\"", "#EXTINF:2,", "s\(index).ts"]
        }
        for (index, line) in untouched.enumerated() { lines += [line, "#EXTINF:2,", "u\(index).ts"] }
        lines += ["#EXT-X-ENDLIST", ""]
        return (lines.joined(separator: "\n"), untouched)
    }

    @Test func everyMethodsKeyIsServedFromKeysAndSealed() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        defer { Task { await harness.shutdown() } }
        var bodies: [[UInt8]] = []
        for entry in Self.methods {
            let key = Self.randomKey(entry.size)
            bodies.append(key)
            harness.origin.setBody(key, contentType: "application/octet-stream", for: entry.path)
        }
        let (text, untouched) = Self.playlist(port: harness.origin.port)
        harness.origin.setBody(Array(text.utf8), for: "/p.m3u8")
        let served = try await harness.get(harness.url("/p.m3u8"))
        #expect(served.status == 200)
        for line in untouched { #expect(served.text.contains(line + "\n"), "\(line) must stay as written") }
        let paths = KeyServingTests.keyPaths(served.text).filter { $0.hasPrefix("/keys/") }
        try #require(paths.count == Self.methods.count, "\(served.text)")
        for (index, entry) in Self.methods.enumerated() {
            #expect(served.text.contains("#EXT-X-KEY:METHOD=\(entry.method),URI=\"\(paths[index])\",KEYFORMAT=\"identity\"\n"))
            let key = try await harness.get(harness.base + paths[index])
            #expect(key.status == 200, "\(entry.method): \(key.text)")
            #expect(key.body == bodies[index], "\(entry.method)")
            #expect(harness.origin.requests(matching: entry.path).count == 1)
        }
        try await harness.waitForIdle()
        for (index, body) in bodies.enumerated() {
            #expect(!anyFile(under: harness.cacheDirectory, contains: body), "\(Self.methods[index].method) key in the clear on disk")
        }
    }

    /// `hlscache fetch` prewarms SAMPLE-AES and AES-256 keys into the key store; with the origin stopped they are
    /// still served.
    @Test func fetchPrewarmsKeysOfEveryMethod() async throws {
        let origin = TestOrigin(root: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        try await origin.start()
        var bodies: [[UInt8]] = []
        for entry in Self.methods {
            let key = Self.randomKey(entry.size)
            bodies.append(key)
            origin.setBody(key, contentType: "application/octet-stream", for: entry.path)
        }
        let (text, _) = Self.playlist(port: origin.port)
        origin.setBody(Array(text.utf8), for: "/p.m3u8")
        for index in 0..<7 {
            origin.setBody(Self.randomKey(1000), contentType: "video/mp2t", for: index < 4 ? "/s\(index).ts" : "/u\(index - 4).ts")
        }
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/p.m3u8", id: "every-method")
        #expect(item.state == .cached, "\(item.errorCode ?? "") \(item.errorMessage ?? "")")
        let statuses = try fetch.downloader.keyStatus(of: "every-method")
        #expect(statuses.count == Self.methods.count)
        #expect(statuses.allSatisfy { $0.state == .valid }, "\(statuses)")
        await origin.stop()
        let keys = fetch.keys
        for (index, entry) in Self.methods.enumerated() {
            let id = keys.id(for: try OriginURL(origin.baseURL + entry.path))
            #expect(try await keys.key(id) == bodies[index], "\(entry.method)")
            #expect(!anyFile(under: fetch.cacheDirectory, contains: bodies[index]), "\(entry.method) key in the clear on disk")
        }
    }

    /// Each method's key has one length (issue 31): 16 bytes for AES-128, SAMPLE-AES, SAMPLE-AES-CTR, 32 for AES-256,
    /// AES-256-CTR. An origin answering the other length gets a clear 502 naming the method, and nothing is stored:
    /// once it answers the right length, that key is served.
    @Test func aKeyOfTheWrongLengthForItsMethodIsRefusedAndNotStored() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        defer { Task { await harness.shutdown() } }
        let methods: [(method: String, size: Int)] = [
            ("AES-128", 16), ("SAMPLE-AES", 16), ("SAMPLE-AES-CTR", 16), ("AES-256", 32), ("AES-256-CTR", 32),
        ]
        var lines = ["#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD"]
        for (index, entry) in methods.enumerated() {
            // The other length: a 32-byte answer for a 16-byte method, and the reverse.
            harness.origin.setBody(Self.randomKey(48 - entry.size), contentType: "application/octet-stream", for: "/wrong/\(index).key")
            lines += ["#EXT-X-KEY:METHOD=\(entry.method),URI=\"wrong/\(index).key\"", "#EXTINF:2,", "s\(index).ts"]
        }
        lines += ["#EXT-X-ENDLIST", ""]
        harness.origin.setBody(Array(lines.joined(separator: "\n").utf8), for: "/wrong.m3u8")
        let served = try await harness.get(harness.url("/wrong.m3u8"))
        #expect(served.status == 200)
        let paths = KeyServingTests.keyPaths(served.text)
        try #require(paths.count == methods.count && paths.allSatisfy { $0.hasPrefix("/keys/") }, "\(served.text)")
        for (index, entry) in methods.enumerated() {
            let answer = try await harness.get(harness.base + paths[index])
            #expect(answer.status == 502, "\(entry.method): \(answer.status)")
            #expect(answer.text.contains("sent \(48 - entry.size) bytes"), "\(answer.text)")
            #expect(answer.text.contains("\(entry.method) keys have \(entry.size) bytes"), "\(answer.text)")
            let id = try #require(KeyID(paths[index].split(separator: "/")[1]))
            #expect(try harness.keys.record(id)?.isStored == false, "\(entry.method): a wrong-sized key was stored")
            #expect(try harness.keys.record(id)?.method == entry.method)
            // The origin fixed: the key of the right length is served.
            let good = Self.randomKey(entry.size)
            harness.origin.setBody(good, contentType: "application/octet-stream", for: "/wrong/\(index).key")
            let fixed = try await harness.get(harness.base + paths[index])
            #expect(fixed.status == 200 && fixed.body == good, "\(entry.method): \(fixed.status) \(fixed.text)")
        }
    }

    /// `hlscache fetch` checks the length against the method too: a 16-byte answer for an AES-256 key fails the item
    /// naming the method, and stores nothing.
    @Test func fetchRefusesAKeyOfTheWrongLengthForItsMethod() async throws {
        let origin = TestOrigin(root: FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-none"))
        try await origin.start()
        let key = Self.randomKey(16)
        origin.setBody(key, contentType: "application/octet-stream", for: "/k/short.key")
        let text = [
            "#EXTM3U", "#EXT-X-TARGETDURATION:2", "#EXT-X-PLAYLIST-TYPE:VOD",
            "#EXT-X-KEY:METHOD=AES-256,URI=\"k/short.key\"", "#EXTINF:2,", "s0.ts", "#EXT-X-ENDLIST", "",
        ].joined(separator: "\n")
        origin.setBody(Array(text.utf8), for: "/short.m3u8")
        origin.setBody(Self.randomKey(1000), contentType: "video/mp2t", for: "/s0.ts")
        let fetch = try DownloaderHarness(origin: origin)
        defer { Task { await fetch.shutdown() } }
        let item = try await fetch.fetch("/short.m3u8", id: "short-key")
        #expect(item.state == .failed, "\(item.state)")
        #expect(item.errorMessage?.contains("AES-256 keys have 32 bytes") == true, "\(item.errorMessage ?? "")")
        #expect(!anyFile(under: fetch.cacheDirectory, contains: key))
        let keys = fetch.keys
        let id = keys.id(for: try OriginURL(origin.baseURL + "/k/short.key"))
        #expect(try keys.record(id)?.isStored == false)
    }
}
