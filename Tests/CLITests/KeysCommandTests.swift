import Foundation
import HLSCacheCore
import HLSDownloader
import HLSKeys
import HLSOrigin
import HLSTestSupport
import Logging
import NIOCore
import NIOHTTP1
import Testing

/// A key fetcher that must not be used: the CLI lists and renews keys itself.
private struct UnusedFetcher: KeyFetcher {
    func fetch(_ url: OriginURL, headers: [(String, String)], maxBytes: Int) async throws(OriginError) -> OriginResponse {
        throw OriginError.network
    }
}

/// A key origin that always answers 16 bytes.
private struct SixteenBytes: KeyFetcher {
    func fetch(_ url: OriginURL, headers: [(String, String)], maxBytes: Int) async throws(OriginError) -> OriginResponse {
        OriginResponse(
            head: OriginResponseHead(status: 200, headers: HTTPHeaders(), url: url),
            body: ByteBuffer(bytes: Array(repeating: 0x42, count: 16)))
    }
}

@Suite struct KeysCommandTests {
    @Test func listsRegisteredKeysWithoutBytesAndRenewReportsFailures() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let empty = try await CLI.run(["keys", "ls", "--cache-dir", cache.path])
        #expect(empty.status == 0)
        #expect(empty.stdout.hasPrefix("ID"))

        let keys = try KeyService(
            directory: cache.path, configuration: KeyConfiguration(), masterKey: MasterKey.load(directory: cache.path, environment: [:]),
            fetcher: UnusedFetcher(), logger: Logger(label: "test"))
        // Port 1 on loopback: nothing listens, so a renewal fails fast.
        let id = try keys.register(OriginURL("http://127.0.0.1:1/keys/k.key?token=secret"))

        let table = try await CLI.run(["keys", "ls", "--cache-dir", cache.path])
        #expect(table.status == 0)
        #expect(table.stdout.contains(id.value))
        #expect(table.stdout.contains("pending"))
        #expect(!table.stdout.contains("secret"))

        let json = try await CLI.run(["keys", "ls", "--json", "--cache-dir", cache.path])
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(entries.count == 1)
        #expect(entries.first?["id"] as? String == id.value)
        #expect(entries.first?["host"] as? String == "127.0.0.1")
        #expect(entries.first?["state"] as? String == "pending")

        let renew = try await CLI.run(["keys", "renew", id.value, "--cache-dir", cache.path])
        #expect(renew.status == 3, "\(renew.stderr)")
        #expect(renew.stderr.hasPrefix("hlscache: keyUnavailable: cannot renew \(id.value): the key is not available"), "\(renew.stderr)")
        #expect(!renew.stderr.contains("Usage"))
        let unknown = try await CLI.run(["keys", "renew", "0123456789abcdef0123456789abcdef", "--cache-dir", cache.path])
        #expect(unknown.status == 4, "\(unknown.stderr)")
        #expect(
            unknown.stderr.hasPrefix("hlscache: notFound: cannot renew 0123456789abcdef0123456789abcdef: no such key"), "\(unknown.stderr)")

        // An unusable master key: a configuration error (78), and the command ends cleanly (no trap).
        let keyFile = cache.appendingPathComponent("master.key").path
        #expect(chmod(keyFile, 0o644) == 0)
        let unsafe = try await CLI.run(["keys", "renew", id.value, "--cache-dir", cache.path])
        #expect(unsafe.status == 78, "\(unsafe.stderr)")
        #expect(
            unsafe.stderr.hasPrefix("hlscache: config error: the master key is unusable: \(keyFile) is readable by other users"),
            "\(unsafe.stderr)")
    }

    /// `hlscache show ID` lists the item's keys with their state and expiry: a stored key reads `valid until …`,
    /// one past its expiry `expired since …`.
    @Test func showListsTheItemsKeysWithStateAndExpiry() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-showkeys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let keyURL = "http://127.0.0.1:1/keys/k.key"
        let items = try ItemStore(directory: cache.path)
        try items.insert(DownloadItem(id: "protected", url: "http://127.0.0.1:1/index.m3u8"))
        try items.setResources(
            "protected",
            [ItemResource(key: CacheKey(try OriginURL(keyURL)).value, url: keyURL, kind: "key", size: 16, done: true)])
        let expiry = Date().addingTimeInterval(3600)
        let keys = try KeyService(
            directory: cache.path, configuration: KeyConfiguration(), masterKey: MasterKey.load(directory: cache.path, environment: [:]),
            fetcher: SixteenBytes(), logger: Logger(label: "test"))
        let id = try keys.register(OriginURL(keyURL), itemExpiry: .at(expiry))
        let pending = try await CLI.run(["show", "protected", "--cache-dir", cache.path])
        #expect(pending.status == 0)
        #expect(pending.stdout.contains("\(id.value)  127.0.0.1  pending"), "\(pending.stdout)")
        _ = try await keys.key(id)

        let json = try await CLI.run(["show", "protected", "--json", "--cache-dir", cache.path])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let listed = try #require(object["keys"] as? [[String: Any]])
        #expect(listed.count == 1)
        #expect(listed.first?["id"] as? String == id.value)
        #expect(listed.first?["state"] as? String == "valid")
        #expect(listed.first?["expiresAt"] as? String == ISO8601DateFormatter().string(from: expiry))
        let text = try await CLI.run(["show", "protected", "--cache-dir", cache.path])
        #expect(text.stdout.contains("valid until \(ISO8601DateFormatter().string(from: expiry))"), "\(text.stdout)")
    }

    @Test func badKeyAndOriginOptionsAreClearErrors() async throws {
        let ttl = try await CLI.run(["serve", "--key-ttl", "soon"])
        #expect(ttl.status != 0)
        #expect(ttl.stderr.contains("--key-ttl"))
        let allow = try await CLI.run(["serve", "--keys-allow", "the-lan"])
        #expect(allow.status != 0)
        #expect(allow.stderr.contains("--keys-allow"))
        let header = try await CLI.run(["serve", "--origin-header", "cdn.example.com"])
        #expect(header.status != 0)
        #expect(header.stderr.contains("--origin-header"))
        let renew = try await CLI.run(["keys", "renew", "not-an-id"])
        #expect(renew.status != 0)
    }
}
