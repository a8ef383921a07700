import Foundation
import HLSKeys

/// One key of an item (any method) and where it stands, as `hlscache show` and the API report it (never the bytes).
public struct ItemKeyStatus: Sendable, Hashable {
    /// The key id, served at `/keys/{id}`.
    public var id: String
    /// The origin host the key comes from.
    public var host: String
    /// `valid`, `expired`, `pending` (not fetched, or purged with its item) or `unreadable`.
    public var state: KeyState
    /// When the stored copy stops being served.
    public var expiresAt: Date?

    public init(id: String, host: String, state: KeyState, expiresAt: Date?) {
        self.id = id
        self.host = host
        self.state = state
        self.expiresAt = expiresAt
    }
}
