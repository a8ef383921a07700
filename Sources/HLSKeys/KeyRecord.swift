import Foundation

/// One registered key as the key store knows it. Holds the sealed bytes, never the key itself.
public struct KeyRecord: Sendable {
    /// The key's id.
    public var id: KeyID
    /// The origin URL the key is fetched from (the latest one seen, with its query). Not shown by the CLI:
    /// it may carry a signing token.
    var url: String
    /// The origin host, for listings.
    public var host: String
    /// When a playlist first named the key.
    public var registeredAt: Date
    /// When the stored copy was fetched; `nil` while pending.
    public var fetchedAt: Date?
    /// The expiry of the stored copy: the earlier of the origin's `Cache-Control: max-age` or `Expires` and the
    /// configured TTL, taken when it was fetched. (Copies stored before 2026-11-25 include the item's expiry too.)
    public var fetchedExpiresAt: Date?
    /// The limit the items holding the key put on it (`hlscache fetch --expires`): the latest of their expiries,
    /// `nil` when one of them never expires or none gave one.
    public var itemExpiresAt: Date?
    /// `nonce | ciphertext | tag` under the master key, with the id as additional data.
    var sealed: [UInt8]?
    /// The ``MasterKey/id`` the key was sealed with.
    public var masterKeyID: String?
    /// Why the last fetch failed, cleared by a successful one.
    public var lastError: String?
    /// The request headers of the item that registered the key (`hlscache fetch --header`), sealed like the key.
    var sealedHeaders: [UInt8]?
    /// The `METHOD` the playlist that named the key last gave it (`AES-128`, `SAMPLE-AES`, `AES-256`, …), which
    /// says the key's length (``KeyService/keySize(method:)``); `nil` when not known (registered before it was
    /// recorded, or by a caller that does not say).
    public var method: String?

    /// The moment the stored copy stops being served: the earlier of ``fetchedExpiresAt`` and ``itemExpiresAt``.
    public var expiresAt: Date? {
        switch (fetchedExpiresAt, itemExpiresAt) {
        case (let a?, let b?): min(a, b)
        case (let a?, nil): a
        case (nil, let b?): b
        case (nil, nil): nil
        }
    }

    /// Whether a copy is stored (readable or not).
    public var isStored: Bool { sealed != nil }

    /// The state at `now` for a process holding the master key `masterKeyID`.
    public func state(masterKeyID current: String, now: Date) -> KeyState {
        guard sealed != nil else {
            // An expired copy's bytes are purged; its expiry stays so the key still reads as expired.
            if let expiresAt, expiresAt <= now { return .expired }
            return .pending
        }
        guard masterKeyID == current else { return .unreadable }
        if let expiresAt, expiresAt <= now { return .expired }
        return .valid
    }
}
