import Foundation
import HLSCrypto
import HLSOrigin
import NIOHTTP1
import Testing

@testable import HLSKeys

@Suite struct KeyAccessPolicyTests {
    @Test func loopbackOnlyByDefault() {
        let policy = KeyAccessPolicy()
        #expect(policy.allows(peer: "127.0.0.1"))
        #expect(policy.allows(peer: "127.8.9.10"))
        #expect(policy.allows(peer: "::1"))
        #expect(policy.allows(peer: "::ffff:127.0.0.1"))
        #expect(!policy.allows(peer: "192.168.1.20"))
        #expect(!policy.allows(peer: "10.0.0.1"))
        #expect(!policy.allows(peer: "fe80::1"))
        #expect(!policy.allows(peer: nil))
        #expect(!policy.allows(peer: "localhost"))
    }

    @Test func configuredNetworks() throws {
        let policy = KeyAccessPolicy(allowedNetworks: [try #require(IPNetwork("192.168.1.0/24")), try #require(IPNetwork("fd00::/8"))])
        #expect(policy.allows(peer: "192.168.1.20"))
        #expect(policy.allows(peer: "::ffff:192.168.1.20"))
        #expect(!policy.allows(peer: "192.168.2.20"))
        #expect(policy.allows(peer: "fd12::1"))
        #expect(!policy.allows(peer: "fc00::1"))
    }

    @Test func parsesCIDR() {
        #expect(IPNetwork("10.0.0.0/8")?.description == "10.0.0.0/8")
        #expect(IPNetwork("10.1.2.3/8")?.description == "10.0.0.0/8")
        #expect(IPNetwork("10.1.2.3")?.description == "10.1.2.3/32")
        #expect(IPNetwork("0.0.0.0/0")?.contains(OriginIPAddress("8.8.8.8")!) == true)
        #expect(IPNetwork("10.0.0.0/33") == nil)
        #expect(IPNetwork("example.com/8") == nil)
        #expect(IPNetwork("10.0.0.0/x") == nil)
    }
}

@Suite struct KeyExpiryTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    @Test func maxAgeWinsOverExpires() {
        var headers = HTTPHeaders()
        headers.add(name: "Expires", value: "Sun, 06 Nov 1994 08:49:37 GMT")
        headers.add(name: "Cache-Control", value: "public, max-age=300")
        #expect(KeyExpiry.origin(headers: headers, now: now) == now.addingTimeInterval(300))
    }

    @Test func expiresAlone() {
        var headers = HTTPHeaders()
        headers.add(name: "Expires", value: "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(KeyExpiry.origin(headers: headers, now: now) == Date(timeIntervalSince1970: 784_111_777))
        headers.replaceOrAdd(name: "Expires", value: "0")
        #expect(KeyExpiry.origin(headers: headers, now: now) == now)
        #expect(KeyExpiry.origin(headers: HTTPHeaders(), now: now) == nil)
    }

    @Test func earliest() {
        #expect(KeyExpiry.earliest(nil, nil) == nil)
        #expect(KeyExpiry.earliest(now, nil, now.addingTimeInterval(-1)) == now.addingTimeInterval(-1))
    }
}

@Suite struct KeyIDTests {
    @Test func parsesOnly32HexDigits() {
        #expect(KeyID("0123456789abcdef0123456789ABCDEF")?.value == "0123456789abcdef0123456789abcdef")
        #expect(KeyID("0123456789abcdef") == nil)
        #expect(KeyID("0123456789abcdef0123456789abcdeg") == nil)
        #expect(KeyID("../../etc/passwd") == nil)
    }
}

@Suite struct SegmentVerificationTests {
    @Test func acceptsTheRightKeyAndRefusesAWrongOne() throws {
        let key = (0..<16).map { UInt8($0) }
        let iv = SegmentVerification.defaultIV(mediaSequence: 7)
        #expect(iv == [UInt8](repeating: 0, count: 15) + [7])
        let segment = try AES128CBC.encrypt((0..<1000).map { UInt8(truncatingIfNeeded: $0) }, key: key, iv: iv)
        try SegmentVerification.verifySegment(lastTwoBlocks: segment.suffix(32), key: key, iv: iv)
        let wrong = key.map { $0 ^ 1 }
        let error = #expect(throws: KeyError.corrupted) {
            try SegmentVerification.verifySegment(lastTwoBlocks: segment.suffix(32), key: wrong, iv: iv)
        }
        #expect(error?.code == "corrupted")
        #expect(throws: KeyError.corrupted) { try SegmentVerification.verifySegment(lastTwoBlocks: segment.suffix(31), key: key, iv: iv) }

        let single = try AES128CBC.encrypt([1, 2, 3], key: key, iv: iv)
        try SegmentVerification.verifySegment(lastTwoBlocks: single, key: key, iv: iv)
    }
}
