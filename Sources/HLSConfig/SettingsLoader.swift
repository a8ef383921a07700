import Configuration
import Foundation
import Yams

/// A configuration that cannot be used: one line naming the key and where its value came from, e.g.
/// `cache.maxSize = "ten" in /etc/hlscache.yaml: not a size (try 10GiB, 500MiB or 4096)`.
package struct SettingsError: Error, Sendable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}

/// The settings in effect, where each came from, and the config file read (if any).
package struct LoadedSettings: Sendable {
    package var settings: HLSCacheSettings
    /// Key → `default`, a flag (`--listen`), `env HLSCACHE_LISTEN`, or the config file's path.
    package var sources: [String: String]
    package var configFile: String?
}

/// What the command line said: values by setting key (only the flags that were given), and `--origin-header`s.
package struct CommandLineSettings: Sendable {
    package var values: [String: [String]] = [:]
    package var originHeaders: [(host: String, field: HLSCacheSettings.Field)] = []
    package init() {}

    package mutating func set(_ key: String, _ value: String?) {
        if let value { values[key] = [value] }
    }

    package mutating func set(_ key: String, _ list: [String]) {
        if !list.isEmpty { values[key] = list }
    }
}

/// Layers the settings: command-line flag > `HLSCACHE_*` environment variable > YAML file > built-in default.
///
/// The layers are swift-configuration providers: an `InMemoryProvider` for the flags, an
/// `EnvironmentVariablesProvider` under the `hlscache` key prefix (so `cache.maxSize` is
/// `HLSCACHE_CACHE_MAX_SIZE`) and a `YAMLSnapshot` of the file. Each key is looked up in them in that order so
/// that the first one that has it wins and is named as the value's source. Before that the file is walked with
/// Yams: a key hlscache does not know is an error, not a silently ignored typo.
package enum SettingsLoader {
    /// The environment variable naming the config file when `--config` is not given.
    package static let configFileVariable = "HLSCACHE_CONFIG"

    package static func load(
        configFile explicitFile: String?, environment: [String: String], commandLine: CommandLineSettings = CommandLineSettings()
    ) throws(SettingsError) -> LoadedSettings {
        let configFile = explicitFile ?? environment[configFileVariable].flatMap { $0.isEmpty ? nil : $0 }
        var settings = HLSCacheSettings()
        var sources: [String: String] = [:]
        let file = try configFile.map { (path: String) throws(SettingsError) in try ConfigFile.read(path) }

        var flagValues: [AbsoluteConfigKey: ConfigValue] = [:]
        for (key, values) in commandLine.values {
            flagValues[AbsoluteConfigKey(key.split(separator: ".").map(String.init))] = ConfigValue(.stringArray(values), isSecret: false)
        }
        let flags = InMemoryProvider(name: "command line", values: flagValues)
        let variables = EnvironmentVariablesProvider(environmentVariables: environment, arraySeparator: ",").prefixKeys(with: "hlscache")

        for key in SettingCatalog.all {
            let configKey = AbsoluteConfigKey(key.name.split(separator: ".").map(String.init))
            let found: (values: [String], source: String)?
            do {
                if let values = try lookup(flags, configKey, list: true) {
                    found = (values, key.flag ?? "command line")
                } else if let result = try lookupResult(variables, configKey, list: key.isList) {
                    found = (result.values, "env \(result.encodedKey)")
                } else if let file, !file.nullKeys.contains(key.name), let values = try lookup(file.snapshot, configKey, list: key.isList) {
                    found = (values, file.path)
                } else {
                    found = nil
                }
            } catch let error as SettingsError {
                throw error
            } catch {
                throw SettingsError("\(key.name): \(error)")
            }
            guard let found else {
                sources[key.name] = "default"
                continue
            }
            if !key.isList, found.values.count != 1 {
                throw SettingsError("\(key.name) in \(found.source): expected a single value, not a list")
            }
            do throws(SettingProblem) {
                try key.apply(&settings, found.values)
            } catch {
                let shown = key.isList ? "" : " = \(SettingText.quoted(key.shown(found.values[0])))"
                throw SettingsError("\(key.name)\(shown) in \(found.source): \(error.message)")
            }
            sources[key.name] = found.source
        }

        if let file {
            for (host, origin) in file.origins {
                settings.origins[host] = origin
                for field in origin.headers { sources["origins.\(host).headers.\(field.name)"] = file.path }
                for field in origin.cookies { sources["origins.\(host).cookies.\(field.name)"] = file.path }
            }
        }
        for (host, field) in commandLine.originHeaders {
            var origin = settings.origins[host] ?? HLSCacheSettings.OriginSettings()
            origin.headers.removeAll { $0.name.lowercased() == field.name.lowercased() }
            origin.headers.append(field)
            settings.origins[host] = origin
            sources["origins.\(host).headers.\(field.name)"] = "--origin-header"
        }
        return LoadedSettings(settings: settings, sources: sources, configFile: file?.path)
    }

    /// A value from one layer, as strings; a scalar given for a list is split at commas.
    private static func lookup(_ layer: some ConfigSnapshotLike, _ key: AbsoluteConfigKey, list: Bool) throws -> [String]? {
        try lookupResult(layer, key, list: list)?.values
    }

    private static func lookupResult(
        _ layer: some ConfigSnapshotLike, _ key: AbsoluteConfigKey, list: Bool
    ) throws -> (values: [String], encodedKey: String)? {
        if list {
            if let result = try? layer.value(forKey: key, type: .stringArray), let value = result.value,
                case .stringArray(let values) = value.content
            {
                return (values, result.encodedKey)
            }
        }
        let result: LookupResult
        do {
            result = try layer.value(forKey: key, type: .string)
        } catch {
            throw SettingsError("\(key) in \(layer.sourceName): expected a single value, not a list or a mapping")
        }
        guard let value = result.value, case .string(let text) = value.content else { return nil }
        return (list ? text.split(separator: ",").map(String.init) : [text], result.encodedKey)
    }
}

/// The providers and the snapshot the loader reads, behind one lookup.
protocol ConfigSnapshotLike {
    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult
    var sourceName: String { get }
}

extension InMemoryProvider: ConfigSnapshotLike {
    var sourceName: String { "command line" }
}

extension KeyMappingProvider: ConfigSnapshotLike {
    var sourceName: String { "environment" }
}

extension YAMLSnapshot: ConfigSnapshotLike {
    var sourceName: String { providerName }
}
