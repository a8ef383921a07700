import HLSOrigin

/// An IPv4 or IPv6 network in CIDR notation (`192.168.1.0/24`, `fd00::/8`; a bare address is a /32 or /128).
package struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
    private let prefix: [UInt8]
    private let length: Int

    /// Parses CIDR notation; `nil` for anything else.
    package init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = OriginIPAddress(String(parts[0])) else { return nil }
        let bits = address.bytes.count * 8
        var length = bits
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...bits).contains(value) else { return nil }
            length = value
        }
        self.length = length
        self.prefix = IPNetwork.mask(address.bytes, length: length)
    }

    /// Whether `address` is inside the network. An IPv4-mapped IPv6 peer (`::ffff:a.b.c.d`, what a dual-stack
    /// listener reports) is compared as its IPv4 address.
    package func contains(_ address: OriginIPAddress) -> Bool {
        var bytes = address.bytes
        if bytes.count == 16, prefix.count == 4, bytes[0..<12].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) {
            bytes = Array(bytes[12...])
        }
        guard bytes.count == prefix.count else { return false }
        return IPNetwork.mask(bytes, length: length) == prefix
    }

    private static func mask(_ bytes: [UInt8], length: Int) -> [UInt8] {
        var out = bytes
        for index in out.indices {
            let keep = max(0, min(8, length - index * 8))
            out[index] &= keep == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - keep))
        }
        return out
    }

    package var description: String {
        let address = OriginIPAddress(bytes: prefix).map { "\($0)" } ?? "?"
        return "\(address)/\(length)"
    }
}
