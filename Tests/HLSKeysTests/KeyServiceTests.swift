import Foundation
import HLSCacheCore
import HLSOrigin
import Logging
import Testing

@testable import HLSKeys

@Suite struct KeyServiceTests {
    static let keyBytes: [UInt8] = (0..<16).map { UInt8(0xA0 + $0) }
    static let url = try! OriginURL("https://cdn.example.com/keys/k0.key?token=abc")

    struct Setup {
        let directory = TemporaryDirectory()
        let origin = FakeKeyOrigin(body: KeyServiceTests.keyBytes)
        let clock = TestClock()

        func service(masterKey: MasterKey? = nil, configure: (inout KeyConfiguration) -> Void = { _ in }) throws -> KeyService {
            var configuration = KeyConfiguration()
            configure(&configuration)
            let master = try masterKey ?? MasterKey.load(directory: directory.path, environment: [:])
            let clock = self.clock
            return try KeyService(
                directory: directory.path, configuration: configuration, masterKey: master, fetcher: origin, logger: Logger(label: "test"),
                now: { clock.now })
        }
    }

    @Test func fetchesOnceThenServesTheStoredCopy() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service()
        let id = try keys.register(Self.url)
        #expect(id.path == "/keys/\(id.value)")
        #expect(try await keys.key(id) == Self.keyBytes)
        #expect(try await keys.key(id) == Self.keyBytes)
        #expect(setup.origin.count == 1)
        #expect(keys.state(of: try #require(try keys.record(id))) == .valid)
        // Another service on the same directory (another process) reads the same stored copy.
        let other = try setup.service()
        #expect(try await other.key(id) == Self.keyBytes)
        #expect(setup.origin.count == 1)
    }

    @Test func theIdIgnoresSigningTokensAndTheKeyNeverReachesTheDisk() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service()
        let id = try keys.register(Self.url)
        #expect(try keys.register(OriginURL("https://cdn.example.com/keys/k0.key?token=fresh")) == id)
        #expect(try keys.register(OriginURL("https://cdn.example.com/keys/k1.key")) != id)
        _ = try await keys.key(id)
        #expect(!setup.directory.containsBytes(Self.keyBytes))
        #expect(!setup.directory.containsBytes(Array(Self.keyBytes[0..<8])))
    }

    /// The in-memory registrations are bounded (a live channel rotating keys names new ones all day): the least
    /// recently named go first; their stored copies stay served by id, and a playlist naming them again registers
    /// them again.
    @Test func registrationsAreBoundedAndTheLeastRecentlyNamedGoFirst() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service { $0.registeredKeysLimit = 3 }
        let urls = try (0..<4).map { try OriginURL("https://cdn.example.com/live/key\($0).key") }
        let first = try keys.register(urls[0])
        _ = try await keys.key(first)
        _ = try keys.register(urls[1])
        _ = try keys.register(urls[2])
        #expect(keys.registeredID(for: urls[0]) == first)  // named again: now the most recent
        _ = try keys.register(urls[3])  // past the bound: key1, the least recently named, goes
        #expect(keys.registeredID(for: urls[1]) == nil)
        #expect(keys.registeredID(for: urls[0]) == first)
        #expect(keys.registeredID(for: urls[2]) != nil && keys.registeredID(for: urls[3]) != nil)
        // Gone from memory, not from the store: the key is served by id without a second origin fetch.
        _ = try keys.register(urls[0])
        #expect(try await keys.key(first) == Self.keyBytes)
        #expect(setup.origin.count == 1)
        let second = try keys.register(urls[1])
        #expect(keys.registeredID(for: urls[1]) == second)
    }

    @Test func concurrentRequestsShareOneFetch() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        setup.origin.set { $0.delay = .milliseconds(200) }
        let keys = try setup.service()
        let id = try keys.register(Self.url)
        try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<8 { group.addTask { try await keys.key(id) } }
            for try await bytes in group { #expect(bytes == Self.keyBytes) }
        }
        #expect(setup.origin.count == 1)
    }

    /// The race a prewarm hit: a caller looked at the record before another fetch stored the key, and asks for a
    /// fetch after that one left the in-flight table. It gets the stored copy; the origin is not asked again.
    @Test func aFetchThatFinishedSinceTheCallerLookedIsNotRepeated() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service()
        let id = try keys.register(Self.url)
        let stale = try #require(try keys.record(id))
        #expect(!stale.isStored)
        #expect(try await keys.key(id) == Self.keyBytes)
        #expect(setup.origin.count == 1)
        #expect(try await keys.fetchShared(stale) == Self.keyBytes)
        #expect(setup.origin.count == 1)
        // A caller that saw the current copy and still asks (a renewal) does fetch.
        let current = try #require(try keys.record(id))
        #expect(try await keys.fetchShared(current) == Self.keyBytes)
        #expect(setup.origin.count == 2)
    }

    /// A key has 16 bytes (AES-128, SAMPLE-AES, SAMPLE-AES-CTR) or 32 (AES-256, AES-256-CTR); nothing else.
    @Test(arguments: [0, 15, 17, 31, 33, 64])
    func refusesKeysThatAreNot16Or32Bytes(_ count: Int) async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        setup.origin.set { $0.body = Array(repeating: 7, count: count) }
        let keys = try setup.service()
        let id = try keys.register(Self.url)
        let error = await #expect(throws: KeyError.keyUnavailable) { try await keys.key(id) }
        #expect(error?.httpStatus == 502)
        #expect(keys.state(of: try #require(try keys.record(id))) == .pending)
        #expect(try keys.record(id)?.lastError?.contains("\(count) bytes") == true)
    }

    @Test func acceptsAnAES256Key() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let key = (0..<32).map { UInt8($0) }
        setup.origin.set { $0.body = key }
        let keys = try setup.service()
        let id = try keys.register(Self.url)
        #expect(try await keys.key(id) == key)
        #expect(keys.state(of: try #require(try keys.record(id))) == .valid)
    }

    @Test func unknownIdIsNotFound() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service()
        let error = await #expect(throws: KeyError.notFound) { try await keys.key(KeyID("0123456789abcdef0123456789abcdef")!) }
        #expect(error?.httpStatus == 404)
    }

    @Test func expiredKeyIsRenewedWhenTheOriginAnswersAndRefusedWhenNot() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service { $0.ttl = .seconds(60) }
        let id = try keys.register(Self.url)
        _ = try await keys.key(id)
        setup.clock.advance(61)
        #expect(keys.state(of: try #require(try keys.record(id))) == .expired)
        #expect(try await keys.key(id) == Self.keyBytes)
        #expect(setup.origin.count == 2)
        #expect(keys.state(of: try #require(try keys.record(id))) == .valid)

        setup.clock.advance(61)
        setup.origin.set { $0.failure = .network }
        let error = await #expect(throws: KeyError.expired) { try await keys.key(id) }
        #expect(error?.httpStatus == 403)
        #expect(error?.code == "expired")
    }

    @Test func theEarliestExpiryWins() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service { $0.ttl = .seconds(3600) }
        setup.origin.set { $0.headers = [("Cache-Control", "private, max-age=120")] }
        let id = try keys.register(Self.url)
        _ = try await keys.key(id)
        #expect(try keys.record(id)?.expiresAt == setup.clock.now.addingTimeInterval(120))

        // An item's expiry (hlscache fetch --expires) is earlier still.
        try keys.register(Self.url, itemExpiry: .at(setup.clock.now.addingTimeInterval(30)))
        #expect(try keys.record(id)?.expiresAt == setup.clock.now.addingTimeInterval(30))
        setup.clock.advance(31)
        setup.origin.set { $0.failure = .network }
        await #expect(throws: KeyError.expired) { try await keys.key(id) }
    }

    /// A copy stored before a live playlist named the key (an earlier run, with the 24 h TTL) is capped when the
    /// key is first seen live; copies fetched later get the live lifetime at fetch time.
    @Test func aKeyNamedByALivePlaylistIsCappedToItsLifetime() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service { $0.ttl = .seconds(24 * 3600) }
        let id = try keys.register(Self.url)
        _ = try await keys.key(id)
        let fetchedAt = setup.clock.now
        #expect(try keys.record(id)?.expiresAt == fetchedAt.addingTimeInterval(24 * 3600))
        setup.clock.advance(5)
        try keys.limitToLive(id, seconds: 14)
        #expect(try keys.record(id)?.expiresAt == fetchedAt.addingTimeInterval(14), "the stored copy is capped")
        setup.clock.advance(10)
        _ = try await keys.key(id)
        #expect(setup.origin.count == 2, "past the lifetime it is fetched again")
        #expect(try keys.record(id)?.expiresAt == setup.clock.now.addingTimeInterval(14), "and the new copy gets it at fetch")
    }

    @Test func aWrongMasterKeyMeansRefetchNeverGarbage() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let first = try setup.service()
        let id = try first.register(Self.url)
        _ = try await first.key(id)

        let other = try setup.service(masterKey: MasterKey.generate())
        #expect(other.state(of: try #require(try other.record(id))) == .unreadable)
        #expect(try await other.key(id) == Self.keyBytes)
        #expect(setup.origin.count == 2)
        #expect(other.state(of: try #require(try other.record(id))) == .valid)

        // Back to the first master key, with the origin down: the copy sealed by `other` cannot be opened.
        setup.origin.set { $0.failure = .network }
        let error = await #expect(throws: KeyError.keyUnavailable) { try await first.key(id) }
        #expect(error?.httpStatus == 403)
    }

    @Test func renewsKeysAboutToExpire() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service { $0.ttl = .seconds(600) }
        let id = try keys.register(Self.url)
        _ = try await keys.key(id)
        #expect(await keys.renewDue(within: .seconds(60)) == (0, 0))
        setup.clock.advance(550)
        #expect(await keys.renewDue(within: .seconds(60)) == (1, 0))
        #expect(try keys.record(id)?.expiresAt == setup.clock.now.addingTimeInterval(600))
        setup.clock.advance(550)
        setup.origin.set { $0.failure = .timeout }
        #expect(await keys.renewDue(within: .seconds(60)) == (0, 1))

        setup.origin.set { $0.failure = nil }
        let renewed = try await keys.renew(id)
        #expect(renewed.expiresAt == setup.clock.now.addingTimeInterval(600))
        #expect(setup.origin.count == 4)
    }
}

@Suite struct MasterKeyTests {
    @Test func createsTheFileWithMode0600AndReusesIt() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanup() }
        let first = try MasterKey.load(directory: directory.path, environment: [:])
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.path + "/master.key")
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let again = try MasterKey.load(directory: directory.path, environment: [:])
        #expect(again.id == first.id)
        #expect(!"\(first)".contains(SHA256Hex.of(first)))
    }

    @Test func theEnvironmentWins() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanup() }
        let hex = String(repeating: "ab", count: 32)
        let key = try MasterKey.load(directory: directory.path, environment: ["HLSCACHE_MASTER_KEY": hex])
        #expect(key.id == (try MasterKey(hex: hex)).id)
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/master.key"))
        #expect(throws: KeyError.masterKey) { try MasterKey.load(directory: directory.path, environment: ["HLSCACHE_MASTER_KEY": "abc"]) }
    }

    @Test func refusesAFileOthersCanRead() throws {
        let directory = TemporaryDirectory()
        defer { directory.cleanup() }
        _ = try MasterKey.load(directory: directory.path, environment: [:])
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: directory.path + "/master.key")
        let error = #expect(throws: KeyError.masterKey) { try MasterKey.load(directory: directory.path, environment: [:]) }
        #expect(error?.message.contains("chmod 600") == true)
    }
}

/// The master key's bytes as hex, to check they are not printed.
enum SHA256Hex {
    static func of(_ key: MasterKey) -> String { key.bytes.map { String(format: "%02x", $0) }.joined() }
}

@Suite struct KeyRenewalServiceTests {
    @Test func renewsInTheBackgroundUntilCancelled() async throws {
        let setup = KeyServiceTests.Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service { $0.ttl = .seconds(600) }
        let id = try keys.register(KeyServiceTests.url)
        _ = try await keys.key(id)
        setup.clock.advance(590)
        let service = KeyRenewalService(keys: keys, before: .seconds(60), interval: .milliseconds(20))
        let running = Task { try await service.run() }
        let deadline = ContinuousClock.now + .seconds(120)
        while setup.origin.count < 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        running.cancel()
        _ = await running.result
        #expect(setup.origin.count >= 2)
        #expect(try keys.record(id)?.expiresAt == setup.clock.now.addingTimeInterval(600))
    }
}
