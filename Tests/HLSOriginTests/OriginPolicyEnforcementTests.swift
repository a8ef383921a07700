import HLSCacheCore
import HLSOrigin
import HLSTestSupport
import Synchronization
import Testing

/// A resolver with fixed answers, so a host name can point at a forbidden address without DNS.
struct StubResolver: OriginHostResolver {
    var answers: [String: [String]]

    func resolve(host: String) async throws -> [OriginIPAddress] {
        guard let answer = answers[host] else { return try await SystemHostResolver().resolve(host: host) }
        return answer.compactMap(OriginIPAddress.init)
    }
}

/// The system resolver, counting the lookups per host.
final class CountingResolver: OriginHostResolver {
    private let counts = Mutex<[String: Int]>([:])
    func resolve(host: String) async throws -> [OriginIPAddress] {
        counts.withLock { $0[host, default: 0] += 1 }
        return try await SystemHostResolver().resolve(host: host)
    }
    func count(_ host: String) -> Int { counts.withLock { $0[host] ?? 0 } }
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

    @Test func aHostIsResolvedOncePerTTLNotOncePerRequest() async throws {
        let resolver = CountingResolver()
        try await withOrigin { configuration in
            configuration.resolver = resolver
            configuration.resolutionTTL = .seconds(3600)  // not the default 10 s: a stalled CI machine could pass that
        } _: { origin, client, _ in
            for _ in 0..<5 {
                let response = try await client.fetch(try OriginURL("http://localhost:\(origin.port)/bytes/10"), maxBytes: 100)
                #expect(response.status == 200)
            }
            #expect(resolver.count("localhost") == 1)
        }
        // Off (zero), and with a short TTL that runs out: a lookup per request, and another after expiry.
        let every = CountingResolver()
        try await withOrigin { configuration in
            configuration.resolver = every
            configuration.resolutionTTL = .zero
        } _: { origin, client, _ in
            for _ in 0..<3 { _ = try await client.fetch(try OriginURL("http://localhost:\(origin.port)/bytes/10"), maxBytes: 100) }
            #expect(every.count("localhost") == 3)
        }
        let short = CountingResolver()
        try await withOrigin { configuration in
            configuration.resolver = short
            configuration.resolutionTTL = .milliseconds(200)
        } _: { origin, client, _ in
            _ = try await client.fetch(try OriginURL("http://localhost:\(origin.port)/bytes/10"), maxBytes: 100)
            // Once the TTL has surely passed, the next request looks the name up again (counted relative to before:
            // a busy machine may already have let the first answer expire).
            try await Task.sleep(for: .milliseconds(300))
            let before = short.count("localhost")
            _ = try await client.fetch(try OriginURL("http://localhost:\(origin.port)/bytes/10"), maxBytes: 100)
            #expect(short.count("localhost") == before + 1)
        }
    }

    @Test func rememberedAddressesAreStillCheckedAgainstThePolicy() async throws {
        // The first request learns that the name points at the metadata service and is refused; so is the second,
        // from the remembered answer (a refusal is never turned into an allowance by the cache).
        try await withOrigin { configuration in
            configuration.resolver = StubResolver(answers: ["metadata.internal.test": ["169.254.169.254"]])
        } _: { _, client, _ in
            for _ in 0..<2 {
                await #expect(throws: OriginError.forbiddenDestination) {
                    try await client.fetch(try OriginURL("http://metadata.internal.test/latest/"), maxBytes: 100)
                }
            }
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
