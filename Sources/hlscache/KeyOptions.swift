import ArgumentParser
import HLSConfig
import HLSKeys

/// The `keys.*` settings of `serve` (and the TTL `keys renew` applies).
struct KeyOptions: ParsableArguments {
    @Option(
        name: .customLong("key-ttl"),
        help:
            "How long a fetched key (any method) is served before it is fetched again, e.g. 24h, 30m, 7d; 'none' for no limit. Default 24h (keys.ttl)."
    )
    var keyTTL: String?

    @Option(
        name: .long, help: ArgumentHelp("A network (CIDR) whose clients may receive keys besides loopback; repeatable.", valueName: "CIDR"))
    var keysAllow: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp("Renew stored keys this many minutes before they expire, while the origin answers.", valueName: "MINUTES"))
    var keyAutoRenew: Double?

    /// The flags given, as settings (`keys.ttl`, `keys.allow`, `keys.autoRenewBefore`).
    func add(to settings: inout CommandLineSettings) throws {
        settings.set("keys.ttl", keyTTL)
        settings.set("keys.allow", keysAllow)
        if let keyAutoRenew {
            guard keyAutoRenew > 0, keyAutoRenew.isFinite else {
                throw ValidationError("--key-auto-renew \(keyAutoRenew): expected minutes > 0")
            }
            settings.set("keys.autoRenewBefore", "\(Int64((keyAutoRenew * 60_000).rounded()))ms")
        }
    }
}
