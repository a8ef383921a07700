import HLSCacheCore
import HLSOrigin
import Testing

/// A resolver with fixed answers, so a host name can point at a forbidden address without DNS.
struct StubResolver: OriginHostResolver {
    var answers: [String: [String]]

    func resolve(host: String) async throws -> [OriginIPAddress] {
        guard let answer = answers[host] else { return try await SystemHostResolver().resolve(host: host) }
        return answer.compactMap(OriginIPAddress.init)
    }
}

@Suite("Destination policy enforced by the client (no connection is made to refused addresses)")
struct OriginPolicyEnforcementTests {
    @Test func hostsOutsideTheAllowListAreRefusedBeforeConnecting() async throws {
        try await withOrigin { configuration in
            configuration.destinationPolicy.allowedHosts = ["cdn.example.com"]
        } _: { origin, client, _ in
            let error = await #expect(throws: OriginError.forbiddenDestination) {
                try await client.fetch(origin.url("/bytes/10"), maxBytes: 100)
            }
            #expect(error?.httpStatus == 403)
            #expect(error?.code == "forbiddenDestination")
            #expect(origin.hits("/bytes/10") == 0)
        }
    }

    @Test func allowListedLoopbackWorks() async throws {
        try await withOrigin { configuration in
            configuration.destinationPolicy.allowedHosts = ["127.0.0.1"]
        } _: { origin, client, _ in
            let response = try await client.fetch(origin.url("/bytes/10"), maxBytes: 100)
            #expect(response.body.readableBytes == 10)
        }
    }

    @Test func loopbackCanBeClosed() async throws {
        try await withOrigin { configuration in
            configuration.destinationPolicy.allowLoopback = false
        } _: { origin, client, _ in
            await #expect(throws: OriginError.forbiddenDestination) { try await client.fetch(origin.url("/bytes/10"), maxBytes: 100) }
            #expect(origin.hits("/bytes/10") == 0)
        }
    }

    @Test(arguments: [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://169.254.10.1/",
        "http://[fe80::1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://2852039166/latest/meta-data/",  // 169.254.169.254 as one decimal number: getaddrinfo accepts it
        "http://0.0.0.0:1/",
    ])
    func forbiddenAddressesAreRefused(url: String) async throws {
        try await withOrigin { _, client, _ in
            await #expect(throws: OriginError.forbiddenDestination) { try await client.fetch(try OriginURL(url), maxBytes: 100) }
        }
    }

    @Test func aHostNameResolvingToTheMetadataServiceIsRefused() async throws {
        try await withOrigin { configuration in
            configuration.resolver = StubResolver(answers: ["metadata.internal.test": ["203.0.113.7", "169.254.169.254"]])
        } _: { _, client, _ in
            let error = await #expect(throws: OriginError.forbiddenDestination) {
                try await client.fetch(try OriginURL("http://metadata.internal.test/latest/"), maxBytes: 100)
            }
            #expect(error?.message.contains("169.254.169.254") == true)
        }
    }

    @Test func localhostResolvesToLoopbackAndIsAllowed() async throws {
        try await withOrigin { origin, client, _ in
            let response = try await client.fetch(try OriginURL("http://localhost:\(origin.port)/bytes/10"), maxBytes: 100)
            #expect(response.status == 200)
        }
    }

    @Test func unresolvableHostsAreNetworkErrors() async throws {
        try await withOrigin { _, client, _ in
            await #expect(throws: OriginError.network) {
                try await client.fetch(try OriginURL("http://no-such-host.invalid/x"), maxBytes: 100)
            }
        }
    }
}
