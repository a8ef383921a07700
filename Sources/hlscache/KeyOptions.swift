import ArgumentParser
import HLSKeys

/// The `keys.*` settings of `serve` (and the TTL `keys renew` applies).
struct KeyOptions: ParsableArguments {
    @Option(name: .customLong("key-ttl"), help: "How long a fetched AES-128 key is served before it is fetched again, e.g. 24h, 30m, 7d; 'none' for no limit.")
    var keyTTL: String = "24h"

    @Option(name: .long, help: ArgumentHelp("A network (CIDR) whose clients may receive keys besides loopback; repeatable.", valueName: "CIDR"))
    var keysAllow: [String] = []

    @Option(name: .long, help: ArgumentHelp("Renew stored keys this many minutes before they expire, while the origin answers.", valueName: "MINUTES"))
    var keyAutoRenew: Double?

    func keyConfiguration() throws -> KeyConfiguration {
        try KeyOptions.configuration(keyTTL: keyTTL, keysAllow: keysAllow, keyAutoRenew: keyAutoRenew)
    }

    static func configuration(keyTTL: String, keysAllow: [String], keyAutoRenew: Double?) throws -> KeyConfiguration {
        var configuration = KeyConfiguration()
        if keyTTL.lowercased() == "none" {
            configuration.ttl = nil
        } else {
            guard let ttl = DurationText.parse(keyTTL), ttl > .zero else {
                throw ValidationError("--key-ttl \(keyTTL): expected a duration such as 24h, 30m, 90s or 7d, or 'none'")
            }
            configuration.ttl = ttl
        }
        var networks: [IPNetwork] = []
        for cidr in keysAllow {
            guard let network = IPNetwork(cidr) else { throw ValidationError("--keys-allow \(cidr): expected a network such as 192.168.1.0/24") }
            networks.append(network)
        }
        configuration.access = KeyAccessPolicy(allowedNetworks: networks)
        if let keyAutoRenew {
            guard keyAutoRenew > 0, keyAutoRenew.isFinite else { throw ValidationError("--key-auto-renew \(keyAutoRenew): expected minutes > 0") }
            configuration.autoRenewBefore = .milliseconds(Int64(keyAutoRenew * 60_000))
        }
        return configuration
    }
}
