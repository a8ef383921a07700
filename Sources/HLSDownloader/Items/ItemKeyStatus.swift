import Foundation
import HLSKeys

/// One key of an item (any method) and where it stands, as `hlscache show` and the API report it (never the bytes).
package struct ItemKeyStatus: Sendable, Hashable {
    /// The key id, served at `/keys/{id}`.
    package var id: String
    /// The origin host the key comes from.
    package var host: String
    /// `valid`, `expired`, `pending` (not fetched, or purged with its item) or `unreadable`.
    package var state: KeyState
    /// When the stored copy stops being served.
    package var expiresAt: Date?

    package init(id: String, host: String, state: KeyState, expiresAt: Date?) {
        self.id = id
        self.host = host
        self.state = state
        self.expiresAt = expiresAt
    }
}
