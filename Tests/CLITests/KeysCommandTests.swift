import Foundation
import HLSCacheCore
import HLSKeys
import HLSOrigin
import Logging
import Testing

/// A key fetcher that must not be used: the CLI lists and renews keys itself.
private struct UnusedFetcher: KeyFetcher {
    func fetch(_ url: OriginURL, headers: [(String, String)], maxBytes: Int) async throws(OriginError) -> OriginResponse {
        throw OriginError.network
    }
}

@Suite struct KeysCommandTests {
    @Test func listsRegisteredKeysWithoutBytesAndRenewReportsFailures() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-cli-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let empty = try CLI.run(["keys", "ls", "--cache-dir", cache.path])
        #expect(empty.status == 0)
        #expect(empty.stdout.hasPrefix("ID"))

        let keys = try KeyService(
            directory: cache.path, configuration: KeyConfiguration(), masterKey: MasterKey.load(directory: cache.path, environment: [:]),
            fetcher: UnusedFetcher(), logger: Logger(label: "test"))
        // Port 1 on loopback: nothing listens, so a renewal fails fast.
        let id = try keys.register(OriginURL("http://127.0.0.1:1/keys/k.key?token=secret"))

        let table = try CLI.run(["keys", "ls", "--cache-dir", cache.path])
        #expect(table.status == 0)
        #expect(table.stdout.contains(id.value))
        #expect(table.stdout.contains("pending"))
        #expect(!table.stdout.contains("secret"))

        let json = try CLI.run(["keys", "ls", "--json", "--cache-dir", cache.path])
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(entries.count == 1)
        #expect(entries.first?["id"] as? String == id.value)
        #expect(entries.first?["host"] as? String == "127.0.0.1")
        #expect(entries.first?["state"] as? String == "pending")

        let renew = try CLI.run(["keys", "renew", id.value, "--cache-dir", cache.path])
        #expect(renew.status != 0)
        #expect(renew.stderr.contains("not available"))
        let unknown = try CLI.run(["keys", "renew", "0123456789abcdef0123456789abcdef", "--cache-dir", cache.path])
        #expect(unknown.status != 0)
        #expect(unknown.stderr.contains("no such key"))
    }

    @Test func badKeyAndOriginOptionsAreClearErrors() throws {
        let ttl = try CLI.run(["serve", "--key-ttl", "soon"])
        #expect(ttl.status != 0)
        #expect(ttl.stderr.contains("--key-ttl"))
        let allow = try CLI.run(["serve", "--keys-allow", "the-lan"])
        #expect(allow.status != 0)
        #expect(allow.stderr.contains("--keys-allow"))
        let header = try CLI.run(["serve", "--origin-header", "cdn.example.com"])
        #expect(header.status != 0)
        #expect(header.stderr.contains("--origin-header"))
        let renew = try CLI.run(["keys", "renew", "not-an-id"])
        #expect(renew.status != 0)
    }
}
