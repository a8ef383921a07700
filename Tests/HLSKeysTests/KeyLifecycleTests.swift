import Foundation
import HLSCacheCore
import HLSOrigin
import Logging
import Testing

@testable import HLSKeys

/// What happens to a key after it is stored: the item's headers that go with every fetch, purging expired copies,
/// forgetting the keys of a deleted item.
@Suite struct KeyLifecycleTests {
    typealias Setup = KeyServiceTests.Setup
    static let url = KeyServiceTests.url
    static let keyBytes = KeyServiceTests.keyBytes

    @Test func itemHeadersAreSealedAndSentWithEveryFetchAndRenewal() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service()
        let id = try keys.register(Self.url, headers: [("Cookie", "session=topsecret-cookie"), ("X-Token", "t0ken-value")])
        _ = try await keys.key(id)
        #expect(setup.origin.lastHeaders.map { "\($0.0): \($0.1)" } == ["Cookie: session=topsecret-cookie", "X-Token: t0ken-value"])
        // A playlist served by the proxy registers the same key again without headers: they stay.
        let proxy = try setup.service()
        try proxy.register(OriginURL("https://cdn.example.com/keys/k0.key?token=fresh"))
        setup.origin.set { $0.body = (0..<16).map { UInt8($0) } }
        _ = try await proxy.renew(id)
        #expect(setup.origin.count == 2)
        #expect(setup.origin.lastHeaders.first?.1 == "session=topsecret-cookie")
        // At rest the header values are sealed like the key.
        #expect(!setup.directory.containsBytes(Array("topsecret-cookie".utf8)))
        #expect(!setup.directory.containsBytes(Array("t0ken-value".utf8)))
    }

    @Test func headersSealedUnderAnotherMasterKeyAreNotSent() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service()
        let id = try keys.register(Self.url, headers: [("Cookie", "a=b")])
        let other = try setup.service(masterKey: MasterKey(bytes: Array(repeating: 9, count: 32)))
        _ = try await other.key(id)
        #expect(setup.origin.lastHeaders.isEmpty)
    }

    @Test func purgingExpiredCopiesDropsTheBytesButTheKeyStillReadsExpired() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service { $0.ttl = .seconds(60) }
        let id = try keys.register(Self.url)
        let fresh = try keys.register(OriginURL("https://cdn.example.com/keys/k1.key"))
        _ = try await keys.key(id)
        setup.clock.advance(30)
        _ = try await keys.key(fresh)
        #expect(try keys.purgeExpired() == 0)
        setup.clock.advance(31)
        #expect(try keys.purgeExpired() == 1)
        let record = try #require(try keys.record(id))
        #expect(!record.isStored)
        #expect(keys.state(of: record) == .expired)
        #expect(try keys.record(fresh)?.isStored == true, "a key still valid is kept")
        // Origin down: refused as expired (403), not as a never-fetched key.
        #expect(keys.statistics.expiries == 0)
        setup.origin.set { $0.failure = .network }
        let error = await #expect(throws: KeyError.expired) { try await keys.key(id) }
        #expect(error?.httpStatus == 403)
        // Each request that found the purged key past its expiry is counted (hlscache_key_expiries_total).
        #expect(keys.statistics.expiries == 1)
        // Origin back: fetched and valid again.
        setup.origin.set { $0.failure = nil }
        #expect(try await keys.key(id) == Self.keyBytes)
        #expect(keys.statistics.expiries == 2)
        #expect(keys.state(of: try #require(try keys.record(id))) == .valid)
        // A valid key (and a key never fetched) is not an expiry.
        _ = try await keys.key(id)
        #expect(keys.statistics.expiries == 2)
    }

    @Test func autoRenewalAlsoRenewsPurgedCopies() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service { $0.ttl = .seconds(60) }
        let id = try keys.register(Self.url)
        _ = try await keys.key(id)
        setup.clock.advance(61)
        #expect(try keys.purgeExpired() == 1)
        let result = await keys.renewDue(within: .seconds(10))
        #expect(result.renewed == 1)
        #expect(keys.state(of: try #require(try keys.record(id))) == .valid)
    }

    @Test func forgettingAKeyMakesItPendingAndTheNextRequestRefetches() async throws {
        let setup = Setup()
        defer { setup.directory.cleanup() }
        let keys = try setup.service()
        let id = try keys.register(Self.url, itemExpiry: .at(setup.clock.now.addingTimeInterval(3600)), headers: [("Cookie", "x=y")])
        _ = try await keys.key(id)
        try keys.forget(id)
        let record = try #require(try keys.record(id))
        #expect(keys.state(of: record) == .pending)
        #expect(record.itemExpiresAt == nil && record.sealedHeaders == nil)
        #expect(try await keys.key(id) == Self.keyBytes)
        #expect(setup.origin.count == 2)
        #expect(setup.origin.lastHeaders.isEmpty, "the deleted item's headers went with it")
    }
}
