import Foundation
import NIOConcurrencyHelpers

/// The download policies of a running `serve` (`GET`/`PATCH /api/v1/policies`, docs/api.md#policies): read and
/// changed by the command, which validates, stores and applies them (the API knows no settings).
package struct PolicyControl: Sendable {
    /// The policies in effect, and those a stored change overrides (key → value as the config file writes it).
    package struct View: Sendable, Equatable {
        package var policies: [String: String]
        package var overrides: [String: String]
        package init(policies: [String: String], overrides: [String: String]) {
            self.policies = policies
            self.overrides = overrides
        }
    }

    package var current: @Sendable () -> View
    /// Applies changes (key → value, or `~reset`); the error says which key was refused and why.
    package var change: @Sendable ([String: String]) async -> Result<View, PolicyRefusal>

    package init(
        current: @escaping @Sendable () -> View, change: @escaping @Sendable ([String: String]) async -> Result<View, PolicyRefusal>
    ) {
        self.current = current
        self.change = change
    }
}

/// A refused policy change: `downloads.rateLimit = "fast": not a rate (try 2MiB or 500KB)`.
package struct PolicyRefusal: Error, Sendable {
    package var message: String
    package init(_ message: String) { self.message = message }
}

extension AdminAPI {
    func showPolicies() throws -> Reply {
        guard let control = policyControl else { throw AdminError.notFound("no policies here") }
        return Reply(status: .ok, json: AdminJSON.string(json(control.current())))
    }

    func changePolicies(_ body: [UInt8]) async throws -> Reply {
        guard let control = policyControl else { throw AdminError.notFound("no policies here") }
        guard let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any], !object.isEmpty else {
            throw AdminError.badRequest("expected a JSON object of policy keys and values")
        }
        var changes: [String: String] = [:]
        for (key, value) in object {
            switch value {
            case is NSNull: changes[key] = "~reset"
            case let text as String: changes[key] = text
            default: throw AdminError.badRequest("\(key): expected a string as in the config file (2MiB, 22:00-06:00, ~) or null (reset)")
            }
        }
        switch await control.change(changes) {
        case .success(let view):
            hub.send(.policy(policies: view.policies))
            wake()
            return Reply(status: .ok, json: AdminJSON.string(json(view)))
        case .failure(let refusal):
            throw AdminError.badRequest(refusal.message)
        }
    }

    /// `rateLimitBytesPerSecond`: the cap the downloader runs with now (null: none), read from it, not the view.
    func json(_ view: PolicyControl.View) -> [String: Any] {
        let rate: Any = downloader.configuration.bytesPerSecond.map { $0 as Any } ?? NSNull()
        return ["policies": view.policies, "overrides": view.overrides, "rateLimitBytesPerSecond": rate]
    }
}
