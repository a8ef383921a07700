import Configuration
import Foundation
import Yams

/// Config/hlscache.yaml as read for one run: the swift-configuration snapshot of its values, the keys set to
/// `~` (null: use the default), and the `origins` section. Reading it checks every key against
/// ``SettingCatalog``: an unknown key, a mapping where a value belongs or a YAML syntax error is a
/// ``SettingsError`` naming the key or the line.
struct ConfigFile {
    let path: String
    let snapshot: YAMLSnapshot
    let nullKeys: Set<String>
    let origins: [String: HLSCacheSettings.OriginSettings]

    static func read(_ path: String) throws(SettingsError) -> ConfigFile {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw SettingsError("cannot read \(path): no such file")
        }
        guard !isDirectory.boolValue else { throw SettingsError("cannot read \(path): it is a directory") }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            let reason = FileManager.default.isReadableFile(atPath: path) ? "\(error.localizedDescription)" : "permission denied"
            throw SettingsError("cannot read \(path): \(reason)")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw SettingsError("\(path): not UTF-8 text") }

        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw SettingsError("\(path): not valid YAML: \(describe(error))")
        }
        var nullKeys: Set<String> = []
        var originsNode: Node?
        if let root {
            guard root.mapping != nil else { throw SettingsError("\(path): expected keys such as `listen:` at the top level") }
            try walk(root, path: [], file: path, nullKeys: &nullKeys, origins: &originsNode)
        }
        let origins = try originsNode.map { (node: Node) throws(SettingsError) in try OriginsSection.parse(node, file: path) } ?? [:]

        // A file with only comments has no root; swift-configuration wants a mapping.
        let source = root == nil ? Data("{}".utf8) : data
        let snapshot: YAMLSnapshot
        do {
            snapshot = try YAMLSnapshot(data: source.bytes, providerName: path, parsingOptions: .default)
        } catch {
            throw SettingsError("\(path): \(error)")
        }
        return ConfigFile(path: path, snapshot: snapshot, nullKeys: nullKeys, origins: origins)
    }

    /// Every key path in the file must be a setting or a section holding settings.
    private static func walk(
        _ node: Node, path: [String], file: String, nullKeys: inout Set<String>, origins: inout Node?
    ) throws(SettingsError) {
        let names = Set(SettingCatalog.all.map(\.name))
        let sections = Set(
            names.flatMap { name in
                let parts = name.split(separator: ".").map(String.init)
                return (1..<max(parts.count, 1)).map { parts[..<$0].joined(separator: ".") }
            })
        guard let mapping = node.mapping else { return }
        for (keyNode, value) in mapping {
            guard let component = keyNode.scalar?.string else {
                throw SettingsError("\(file): line \(keyNode.mark?.line ?? 0): a key must be a plain name")
            }
            let full = (path + [component]).joined(separator: ".")
            let line = keyNode.mark.map { " (line \($0.line))" } ?? ""
            if path.isEmpty, component == SettingCatalog.originsKey {
                origins = value
                continue
            }
            if names.contains(full) {
                if value.isNullValue { nullKeys.insert(full) }
                if value.mapping != nil { throw SettingsError("\(full) in \(file)\(line): expected a value, not a mapping") }
                continue
            }
            if sections.contains(full) {
                if value.isNullValue { continue }
                guard value.mapping != nil else {
                    throw SettingsError("\(full) in \(file)\(line): expected keys under it, e.g. \(example(under: full))")
                }
                try walk(value, path: path + [component], file: file, nullKeys: &nullKeys, origins: &origins)
                continue
            }
            throw SettingsError("\(full) in \(file)\(line): unknown key\(suggestion(for: full, names: names))")
        }
    }

    private static func example(under section: String) -> String {
        SettingCatalog.all.first { $0.name.hasPrefix(section + ".") }?.name ?? section
    }

    private static func suggestion(for key: String, names: Set<String>) -> String {
        if let match = names.first(where: { $0.lowercased() == key.lowercased() }) { return " (did you mean \(match)?)" }
        let last = key.split(separator: ".").last.map(String.init)?.lowercased() ?? key
        let matches = names.filter { $0.split(separator: ".").last.map(String.init)?.lowercased() == last }.sorted()
        if !matches.isEmpty { return " (did you mean \(matches.joined(separator: " or "))?)" }
        return " (see docs/configuration.md)"
    }

    /// One line for a Yams error: `line 3, column 7: mapping values are not allowed in this context`.
    static func describe(_ error: any Error) -> String {
        if let error = error as? YamlError {
            switch error {
            case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
                return "line \(mark.line), column \(mark.column): \(problem)"
            default:
                break
            }
        }
        return "\(error)".split(separator: "\n").first.map(String.init) ?? "\(error)"
    }
}

extension Node {
    /// `key:`, `key: ~` and `key: null`.
    var isNullValue: Bool {
        null != nil
    }
}
