import Foundation

/// One registered key as the key store knows it. Holds the sealed bytes, never the key itself.
package struct KeyRecord: Sendable {
    /// The key's id.
    package var id: KeyID
    /// The origin URL the key is fetched from (the latest one seen, with its query). Not shown by the CLI:
    /// it may carry a signing token.
    var url: String
    /// The origin host, for listings.
    package var host: String
    /// When a playlist first named the key.
    package var registeredAt: Date
    /// When the stored copy was fetched; `nil` while pending.
    package var fetchedAt: Date?
    /// The expiry of the stored copy: the earlier of the origin's `Cache-Control: max-age` or `Expires` and the
    /// configured TTL, taken when it was fetched. (Copies stored before 2026-11-25 include the item's expiry too.)
    package var fetchedExpiresAt: Date?
    /// The limit the items holding the key put on it (`hlscache fetch --expires`): the latest of their expiries,
    /// `nil` when one of them never expires or none gave one.
    package var itemExpiresAt: Date?
    /// `nonce | ciphertext | tag` under the master key, with the id as additional data.
    var sealed: [UInt8]?
    /// The ``MasterKey/id`` the key was sealed with.
    package var masterKeyID: String?
    /// Why the last fetch failed, cleared by a successful one.
    package var lastError: String?
    /// The request headers of the item that registered the key (`hlscache fetch --header`), sealed like the key.
    var sealedHeaders: [UInt8]?
    /// The `METHOD` the playlist that named the key last gave it (`AES-128`, `SAMPLE-AES`, `AES-256`, …), which
    /// says the key's length (``KeyService/keySize(method:)``); `nil` when not known (registered before it was
    /// recorded, or by a caller that does not say).
    package var method: String?

    /// The moment the stored copy stops being served: the earlier of ``fetchedExpiresAt`` and ``itemExpiresAt``.
    package var expiresAt: Date? {
        switch (fetchedExpiresAt, itemExpiresAt) {
        case (let a?, let b?): min(a, b)
        case (let a?, nil): a
        case (nil, let b?): b
        case (nil, nil): nil
        }
    }

    /// Whether a copy is stored (readable or not).
    package var isStored: Bool { sealed != nil }

    /// The state at `now` for a process holding the master key `masterKeyID`.
    package func state(masterKeyID current: String, now: Date) -> KeyState {
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
