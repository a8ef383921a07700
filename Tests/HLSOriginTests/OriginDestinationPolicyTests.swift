import HLSCacheCore
import HLSOrigin
import Testing

@Suite("Destination policy")
struct OriginDestinationPolicyTests {
    @Test(arguments: [
        ("127.0.0.1", OriginIPAddress.Kind.loopback),
        ("127.9.9.9", .loopback),
        ("::1", .loopback),
        ("10.1.2.3", .privateNetwork),
        ("172.16.0.1", .privateNetwork),
        ("172.31.255.255", .privateNetwork),
        ("172.32.0.1", .global),
        ("192.168.1.1", .privateNetwork),
        ("100.64.0.1", .privateNetwork),
        ("fd12:3456::1", .privateNetwork),
        ("169.254.1.1", .linkLocal),
        ("fe80::1", .linkLocal),
        ("febf::1", .linkLocal),
        ("169.254.169.254", .cloudMetadata),
        ("fd00:ec2::254", .cloudMetadata),
        ("100.100.100.200", .cloudMetadata),
        ("::ffff:169.254.169.254", .cloudMetadata),
        ("::ffff:127.0.0.1", .loopback),
        ("64:ff9b::a9fe:a9fe", .cloudMetadata),
        ("0.0.0.0", .unroutable),
        ("::", .unroutable),
        ("224.0.0.1", .unroutable),
        ("ff02::1", .unroutable),
        ("8.8.8.8", .global),
        ("2001:db8::1", .global),
        ("[fe80::1%eth0]", .linkLocal),
    ])
    func addressKinds(text: String, kind: OriginIPAddress.Kind) throws {
        let address = try #require(OriginIPAddress(text))
        #expect(address.kind == kind, "\(text)")
    }

    @Test func hostNamesAreNotAddresses() {
        #expect(OriginIPAddress("cdn.example.com") == nil)
        #expect(OriginIPAddress("127.0.0.1").map(String.init(describing:)) == "127.0.0.1")
        #expect(OriginIPAddress("FD00:EC2:0::254").map(String.init(describing:)) == "fd00:ec2::254")
    }

    @Test func defaultPolicy() throws {
        let policy = OriginDestinationPolicy()
        for allowed in ["127.0.0.1", "::1", "192.168.0.10", "8.8.8.8"] {
            #expect(policy.allowsAddress(try #require(OriginIPAddress(allowed))), "\(allowed)")
        }
        for refused in ["169.254.169.254", "169.254.10.10", "fe80::1", "fd00:ec2::254", "0.0.0.0", "::ffff:169.254.169.254"] {
            #expect(!policy.allowsAddress(try #require(OriginIPAddress(refused))), "\(refused)")
        }
    }

    @Test func flagsOpenOnlyTheirOwnRanges() throws {
        let linkLocal = OriginDestinationPolicy(allowLinkLocal: true)
        #expect(linkLocal.allowsAddress(try #require(OriginIPAddress("169.254.1.1"))))
        #expect(!linkLocal.allowsAddress(try #require(OriginIPAddress("169.254.169.254"))), "metadata needs its own flag")
        let metadata = OriginDestinationPolicy(allowCloudMetadata: true)
        #expect(metadata.allowsAddress(try #require(OriginIPAddress("169.254.169.254"))))
        let closed = OriginDestinationPolicy(allowLoopback: false, allowPrivateNetworks: false)
        #expect(!closed.allowsAddress(try #require(OriginIPAddress("127.0.0.1"))))
        #expect(!closed.allowsAddress(try #require(OriginIPAddress("10.0.0.1"))))
        #expect(closed.allowsAddress(try #require(OriginIPAddress("8.8.8.8"))))
    }

    @Test func allowedHosts() {
        let policy = OriginDestinationPolicy(allowedHosts: ["cdn.example.com", ".media.example.org", "*.video.test", "127.0.0.1"])
        #expect(policy.allowsHost("cdn.example.com"))
        #expect(policy.allowsHost("CDN.Example.com"))
        #expect(!policy.allowsHost("evil-cdn.example.com"))
        #expect(!policy.allowsHost("cdn.example.com.evil.net"))
        #expect(policy.allowsHost("a.media.example.org"))
        #expect(!policy.allowsHost("media.example.org"))
        #expect(policy.allowsHost("x.y.video.test"))
        #expect(!policy.allowsHost("video.test"))
        #expect(!policy.allowsHost("xvideo.test"))
        #expect(policy.allowsHost("127.0.0.1"))
        #expect(OriginDestinationPolicy().allowsHost("anything.example"))
    }
}
