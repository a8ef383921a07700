import Foundation
import HLSCacheCore
import HLSKeys

/// Why a value was refused, without the key and the source (the loader adds them): `not a size (try 10GiB)`.
package struct SettingProblem: Error, Sendable {
    package var message: String
    package init(_ message: String) { self.message = message }
}

/// One setting: its key in Config/hlscache.yaml, its `HLSCACHE_*` environment variable, its flag (if any), how a
/// value is read into ``HLSCacheSettings`` and how the effective value is written back for `--print-config`.
package struct SettingKey {
    /// The YAML key path, e.g. `cache.maxSize`.
    package let name: String
    /// The command-line flag of `serve` (and the other commands that take it), e.g. `--max-cache-size`.
    package let flag: String?
    /// A list: a YAML sequence, a comma-separated environment variable, a repeatable flag.
    package let isList: Bool
    /// Masked by `--print-config`.
    package let isSecret: Bool
    /// For a value that holds a secret in part (a proxy's password): how it is shown.
    var mask: ((String) -> String)? = nil
    /// One line for docs/configuration.md and the example file.
    package let summary: String
    let apply: (inout HLSCacheSettings, [String]) throws(SettingProblem) -> Void
    /// The effective value as it would be written in the file; nil when unset.
    let render: (HLSCacheSettings) -> String?

    /// `HLSCACHE_` + the key path upper-cased, camelCase words and path components joined by `_`
    /// (`cache.maxSize` → `HLSCACHE_CACHE_MAX_SIZE`): the names swift-configuration's
    /// `EnvironmentVariablesProvider` looks up under the `hlscache` prefix.
    package var environmentName: String { Self.environmentName(for: "hlscache." + name) }

    static func environmentName(for keyPath: String) -> String {
        keyPath.split(separator: ".").map { component in
            var words = ""
            var previous: Character?
            for character in component {
                if let previous, previous.isLowercase, character.isUppercase { words.append("_") }
                words.append(character)
                previous = character
            }
            return String(words.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
        }.joined(separator: "_")
    }

    /// The value in `settings` as `--print-config` shows it (secrets masked).
    package func displayValue(_ settings: HLSCacheSettings) -> String {
        guard let value = render(settings) else { return "~" }
        return shown(value)
    }

    /// A value as `--print-config` and error messages show it: a secret masked.
    func shown(_ value: String) -> String {
        if isSecret { return "********" }
        return mask?(value) ?? value
    }

    /// The value in `settings` as the example file writes it (`~` when unset).
    package func fileValue(_ settings: HLSCacheSettings) -> String {
        render(settings) ?? "~"
    }
}

// MARK: - Kinds of values

typealias Settings = HLSCacheSettings

extension SettingKey {
    static func single(
        _ name: String, flag: String? = nil, secret: Bool = false, mask: ((String) -> String)? = nil, _ summary: String,
        apply: @escaping (inout Settings, String) throws(SettingProblem) -> Void, render: @escaping (Settings) -> String?
    ) -> SettingKey {
        SettingKey(
            name: name, flag: flag, isList: false, isSecret: secret, mask: mask, summary: summary,
            apply: { (settings: inout Settings, values: [String]) throws(SettingProblem) in try apply(&settings, values.first ?? "") },
            render: render)
    }

    static func size<Value: BinaryInteger>(
        _ name: String, _ keyPath: WritableKeyPath<Settings, Value>, flag: String? = nil, minimum: Int64 = 0, _ summary: String
    ) -> SettingKey {
        single(
            name, flag: flag, summary,
            apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                guard let bytes = SettingText.size(text) else { throw SettingProblem("not a size (try 10GiB, 500MiB or 4096)") }
                guard bytes >= minimum, bytes <= Int64(Int.max) else {
                    throw SettingProblem("must be at least \(SettingText.format(bytes: minimum))")
                }
                settings[keyPath: keyPath] = Value(bytes)
            }, render: { SettingText.format(bytes: Int64($0[keyPath: keyPath])) })
    }

    static func duration(
        _ name: String, _ keyPath: WritableKeyPath<Settings, Duration>, flag: String? = nil, allowZero: Bool = false,
        _ summary: String
    ) -> SettingKey {
        single(
            name, flag: flag, summary,
            apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                guard let duration = SettingText.duration(text) else {
                    throw SettingProblem("not a duration (try 500ms, 10s, 5m, 24h or 7d)")
                }
                guard allowZero || duration > .zero else { throw SettingProblem("must be longer than 0s") }
                settings[keyPath: keyPath] = duration
            }, render: { SettingText.format($0[keyPath: keyPath]) })
    }

    /// A size that may be `~` or `none` (no limit).
    static func optionalSize(_ name: String, _ keyPath: WritableKeyPath<Settings, Int64?>, flag: String? = nil, _ summary: String)
        -> SettingKey
    {
        single(
            name, flag: flag, summary,
            apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                if text.isEmpty || text == "~" || text.lowercased() == "none" {
                    settings[keyPath: keyPath] = nil
                    return
                }
                guard let bytes = SettingText.size(text), bytes > 0 else {
                    throw SettingProblem("not a size (try 10GiB, 500MiB or 4096), or ~")
                }
                settings[keyPath: keyPath] = bytes
            }, render: { $0[keyPath: keyPath].map { SettingText.format(bytes: $0) } })
    }

    /// A webhook receiver: an absolute http(s) URL.
    static func webhookURL(_ text: String) -> String? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil
        else {
            return "not an http(s) URL"
        }
        return nil
    }

    /// A duration that may be `none` (no limit, or not enabled).
    static func optionalDuration(
        _ name: String, _ keyPath: WritableKeyPath<Settings, Duration?>, flag: String? = nil, _ summary: String
    ) -> SettingKey {
        single(
            name, flag: flag, summary,
            apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                if text.lowercased() == "none" {
                    settings[keyPath: keyPath] = nil
                    return
                }
                guard let duration = SettingText.duration(text), duration > .zero else {
                    throw SettingProblem("not a duration (try 30m, 24h or 7d, or none)")
                }
                settings[keyPath: keyPath] = duration
            }, render: { $0[keyPath: keyPath].map(SettingText.format) ?? "none" })
    }

    static func int(
        _ name: String, _ keyPath: WritableKeyPath<Settings, Int>, flag: String? = nil, range: ClosedRange<Int>, _ summary: String
    ) -> SettingKey {
        single(
            name, flag: flag, summary,
            apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                guard let value = Int(text.trimmingCharacters(in: .whitespaces)) else { throw SettingProblem("not a whole number") }
                guard range.contains(value) else { throw SettingProblem("must be between \(range.lowerBound) and \(range.upperBound)") }
                settings[keyPath: keyPath] = value
            }, render: { String($0[keyPath: keyPath]) })
    }

    /// A value read by `parse`, or `auto` (nil: worked out from the machine when used); `problem` says what else is
    /// expected. Blanks around the text are trimmed before either is read.
    static func auto<Value>(
        _ name: String, _ keyPath: WritableKeyPath<Settings, Value?>, _ summary: String, problem: String,
        parse: @escaping (String) -> Value?, render: @escaping (Value) -> String
    ) -> SettingKey {
        single(
            name, summary,
            apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                let text = text.trimmingCharacters(in: .whitespaces)
                if text.lowercased() == "auto" {
                    settings[keyPath: keyPath] = nil
                    return
                }
                guard let value = parse(text) else { throw SettingProblem(problem) }
                settings[keyPath: keyPath] = value
            }, render: { $0[keyPath: keyPath].map(render) ?? "auto" })
    }

    static func double(
        _ name: String, _ keyPath: WritableKeyPath<Settings, Double>, range: ClosedRange<Double>, _ summary: String
    ) -> SettingKey {
        single(
            name, summary,
            apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite else {
                    throw SettingProblem("not a number")
                }
                guard range.contains(value) else { throw SettingProblem("must be between \(range.lowerBound) and \(range.upperBound)") }
                settings[keyPath: keyPath] = value
            }, render: { String($0[keyPath: keyPath]) })
    }

    static func bool(_ name: String, _ keyPath: WritableKeyPath<Settings, Bool>, flag: String? = nil, _ summary: String) -> SettingKey {
        single(
            name, flag: flag, summary,
            apply: { (settings: inout Settings, text: String) throws(SettingProblem) in
                guard let value = SettingText.bool(text) else { throw SettingProblem("not true or false") }
                settings[keyPath: keyPath] = value
            }, render: { String($0[keyPath: keyPath]) })
    }

    static func list(
        _ name: String, _ keyPath: WritableKeyPath<Settings, [String]>, flag: String? = nil,
        validate: @escaping (String) -> String? = { _ in nil }, _ summary: String
    ) -> SettingKey {
        SettingKey(
            name: name, flag: flag, isList: true, isSecret: false, summary: summary,
            apply: { (settings: inout Settings, values: [String]) throws(SettingProblem) in
                let items = values.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
                for item in items {
                    if let problem = validate(item) { throw SettingProblem("\(SettingText.quoted(item)): \(problem)") }
                }
                settings[keyPath: keyPath] = items
            }, render: { "[" + $0[keyPath: keyPath].map(SettingText.quoted).joined(separator: ", ") + "]" })
    }

    static func cidr(_ text: String) -> String? {
        IPNetwork(text) == nil ? "not a network (try 192.168.1.0/24 or 10.0.0.0/8)" : nil
    }

    static func webOrigin(_ text: String) -> String? {
        do {
            _ = try WebOriginPolicy(parsing: [text])
            return nil
        } catch {
            return error.description
        }
    }

    static func serverName(_ text: String) -> String? {
        ServerBaseURL.isValidName(text) ? nil : "not a host name or host:port"
    }

    static func headerValue(_ text: String) -> String? {
        text.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) ? "must be a single header value" : nil
    }
}
