/// Where a registered key stands, as `hlscache keys ls` reports it.
package enum KeyState: String, Sendable, Hashable, CaseIterable {
    /// Seen in a playlist, never fetched yet.
    case pending
    /// Stored and not past its expiry.
    case valid
    /// Stored but past its expiry: the next request refetches it, or is refused if the origin does not answer.
    case expired
    /// Stored under another master key (or damaged): treated as missing, refetched on the next request.
    case unreadable
}
