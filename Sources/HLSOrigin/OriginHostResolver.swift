/// Turns an origin host name into the addresses a connection may go to, so the destination policy judges
/// addresses and not spellings (`2852039166`, `0xa9.0xfe.0xa9.0xfe` and a DNS name pointing at
/// 169.254.169.254 are all the metadata service).
package protocol OriginHostResolver: Sendable {
    /// Every address `host` resolves to; throws when it does not resolve. `host` has no IPv6 brackets.
    func resolve(host: String) async throws -> [OriginIPAddress]
}
