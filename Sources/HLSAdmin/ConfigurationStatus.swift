import Foundation

/// What `GET /api/v1/status` says of the configuration (`configuration`): the file read, and what the last reload
/// (`SIGHUP`, `hlscache reload`) did. Set by the command that reloads (docs/operations.md#reload).
package struct ConfigurationStatus: Sendable, Equatable {
    /// The config file read at start and on reload; `nil` without one.
    package var file: String?
    /// Reloads that changed the running server or found nothing to change (refused ones are not counted).
    package var reloads = 0
    /// When the last accepted reload happened.
    package var reloadedAt: Date?
    /// The settings the last accepted reload applied.
    package var applied: [String] = []
    /// Settings whose value in the configuration differs from the one the server runs with: a restart takes them.
    package var needsRestart: [String] = []
    /// Why the last reload was refused (`KEY = VALUE in SOURCE: PROBLEM`), when it was the last one; `nil` after an
    /// accepted one.
    package var lastError: String?
    /// When the last reload was refused.
    package var refusedAt: Date?

    package init(file: String? = nil) {
        self.file = file
    }

    /// The `configuration` object of `/status`.
    var json: [String: Any] {
        var object: [String: Any] = ["reloads": reloads, "applied": applied, "needsRestart": needsRestart]
        if let file { object["file"] = file }
        if let reloadedAt { object["reloadedAt"] = AdminJSON.iso(reloadedAt) }
        if let lastError { object["lastError"] = lastError }
        if let refusedAt { object["refusedAt"] = AdminJSON.iso(refusedAt) }
        return object
    }
}
