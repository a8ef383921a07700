import Foundation

/// The download policies an operator may change while `serve` runs (`PATCH /api/v1/policies`, `hlscache policy
/// set`), kept in `policies.json` in the cache directory. Each value is validated exactly as the config file's value
/// of the same key; a stored value overrides the config file (and env and flags) until it is reset with `~reset`.
package struct RuntimePolicies: Sendable, Equatable {
    /// The keys that may change at run time, as in Config/hlscache.yaml.
    package static let keys = [
        "downloads.rateLimit", "downloads.itemRate", "downloads.dailyLimit", "downloads.window", "downloads.concurrentItems",
        "downloads.defaultSeconds", "downloads.autoPurge",
    ]
    /// The value that removes a stored override, so the configured value applies again.
    package static let reset = "~reset"
    /// The file in the cache directory.
    package static let fileName = "policies.json"

    /// Key → value as the config file writes it.
    package private(set) var values: [String: String]

    package init(values: [String: String] = [:]) { self.values = values }

    /// `settings` with every stored override applied.
    package func applied(to settings: HLSCacheSettings) throws(SettingsError) -> HLSCacheSettings {
        var result = settings
        for name in values.keys.sorted() {
            guard let key = SettingCatalog.key(name), let value = values[name] else { continue }
            do throws(SettingProblem) {
                try key.apply(&result, [value])
            } catch {
                throw SettingsError("\(name) in \(Self.fileName): \(error.message)")
            }
        }
        return result
    }

    /// These policies with `changes` (key → value, or ``reset``) applied, each value checked against `settings` like
    /// the config file's; the error names the first refused key.
    package func changing(_ changes: [String: String], over settings: HLSCacheSettings) throws(SettingsError) -> RuntimePolicies {
        var next = self
        var probe = settings
        for name in changes.keys.sorted() {
            guard Self.keys.contains(name), let key = SettingCatalog.key(name) else {
                throw SettingsError("\(name): not a policy (one of \(Self.keys.joined(separator: ", ")))")
            }
            let value = changes[name] ?? ""
            if value == Self.reset {
                next.values[name] = nil
                continue
            }
            do throws(SettingProblem) {
                try key.apply(&probe, [value])
            } catch {
                throw SettingsError("\(name) = \(SettingText.quoted(value)): \(error.message)")
            }
            next.values[name] = key.render(probe) ?? "~"
        }
        return next
    }

    /// The effective value of every policy key in `settings`, as the config file writes it (`~`: none).
    package static func effective(_ settings: HLSCacheSettings) -> [String: String] {
        var result: [String: String] = [:]
        for name in keys { result[name] = SettingCatalog.key(name)?.fileValue(settings) ?? "~" }
        return result
    }

    /// The stored policies of the cache directory `directory` (none when the file is missing).
    package static func load(directory: String) throws(SettingsError) -> RuntimePolicies {
        let path = (directory as NSString).appendingPathComponent(fileName)
        guard FileManager.default.fileExists(atPath: path) else { return RuntimePolicies() }
        guard let data = FileManager.default.contents(atPath: path),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: String]
        else {
            throw SettingsError("\(path): not a JSON object of strings")
        }
        return RuntimePolicies(values: object.filter { keys.contains($0.key) })
    }

    /// Writes the policies to the cache directory `directory`: a temporary file renamed over the old one.
    package func save(directory: String) throws {
        let path = (directory as NSString).appendingPathComponent(Self.fileName)
        let data = try JSONSerialization.data(withJSONObject: values, options: [.sortedKeys])
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
