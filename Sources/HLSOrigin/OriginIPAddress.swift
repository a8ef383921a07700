#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An IPv4 or IPv6 address as raw network-order bytes, classified for the destination policy.
package struct OriginIPAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes for IPv4, 16 for IPv6.
    package let bytes: [UInt8]

    /// What kind of network an address belongs to, as far as the destination policy cares.
    package enum Kind: String, Sendable, Hashable {
        /// 127.0.0.0/8, ::1.
        case loopback
        /// 10/8, 172.16/12, 192.168/16, 100.64/10 (carrier-grade NAT), fc00::/7.
        case privateNetwork
        /// 169.254.0.0/16, fe80::/10.
        case linkLocal
        /// Cloud instance metadata services: 169.254.169.254, fd00:ec2::254, 100.100.100.200.
        case cloudMetadata
        /// 0.0.0.0/8, ::, multicast, broadcast: never a valid origin.
        case unroutable
        /// Everything else.
        case global
    }

    /// Wraps raw bytes; `nil` unless there are exactly 4 or 16.
    package init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// Parses a numeric address (`127.0.0.1`, `::1`, `[fe80::1]`); host names give `nil`.
    package init?(_ text: String) {
        var text = Substring(text)
        if text.hasPrefix("[") && text.hasSuffix("]") { text = text.dropFirst().dropLast() }
        if let zone = text.firstIndex(of: "%") { text = text[..<zone] }
        var v4 = in_addr()
        if inet_pton(AF_INET, String(text), &v4) == 1 {
            self.bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, String(text), &v6) == 1 {
            self.bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    /// Whether this is an IPv4 address.
    package var isIPv4: Bool { bytes.count == 4 }

    /// The IPv4 address embedded in an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated (`::ffff:0:a.b.c.d`),
    /// IPv4-compatible (`::a.b.c.d`) or
    /// NAT64 (`64:ff9b::a.b.c.d`) IPv6 address: such addresses reach the IPv4 host, so they are judged as it.
    var embeddedIPv4: OriginIPAddress? {
        guard bytes.count == 16 else { return nil }
        let head = bytes[0..<12]
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]
        let nat64: [UInt8] = [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]
        // IPv4-translated (SIIT, RFC 2765: `::ffff:0:a.b.c.d`).
        let translated: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0, 0]
        let compatible =
            head.allSatisfy { $0 == 0 } && bytes[12..<16].contains { $0 != 0 }
            && !(bytes[12..<15].allSatisfy { $0 == 0 } && bytes[15] <= 1)  // :: and ::1 are not IPv4
        if Array(head) == mapped || Array(head) == nat64 || Array(head) == translated || compatible {
            return OriginIPAddress(bytes: Array(bytes[12..<16]))
        }
        return nil
    }

    /// The address's kind; metadata addresses are reported as `cloudMetadata`, not as link-local or private.
    package var kind: Kind {
        if let v4 = embeddedIPv4 { return v4.kind }
        let b = bytes
        if b.count == 4 {
            switch (b[0], b[1], b[2], b[3]) {
            case (169, 254, 169, 254), (100, 100, 100, 200): return .cloudMetadata
            case (127, _, _, _): return .loopback
            case (10, _, _, _), (192, 168, _, _): return .privateNetwork
            case (172, 16...31, _, _), (100, 64...127, _, _): return .privateNetwork
            case (169, 254, _, _): return .linkLocal
            case (0, _, _, _), (224...255, _, _, _): return .unroutable
            default: return .global
            }
        }
        let metadata: [UInt8] = [0xFD, 0x00, 0x0E, 0xC2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54]
        if b == metadata { return .cloudMetadata }
        if b[0..<15].allSatisfy({ $0 == 0 }) { return b[15] == 1 ? .loopback : .unroutable }
        if b[0] == 0xFE && (b[1] & 0xC0) == 0x80 { return .linkLocal }
        if (b[0] & 0xFE) == 0xFC { return .privateNetwork }
        if b[0] == 0xFF { return .unroutable }
        return .global
    }

    package var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let ok = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil
        }
        guard ok else { return bytes.map(String.init).joined(separator: ".") }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
