import Yams

/// The `origins` section: headers and cookies sent to one origin host only.
///
/// ```yaml
/// origins:
///   cdn.example.com:
///     headers:
///       Referer: https://player.example.com/
///     cookies:
///       session: abc123
/// ```
///
/// Hosts are matched like `--origin-header`: `host` or `host:port` (the latter wins), case-insensitively.
/// It lives only in the file (headers can also be given with `--origin-header`).
enum OriginsSection {
    static func parse(_ node: Node, file: String) throws(SettingsError) -> [String: HLSCacheSettings.OriginSettings] {
        if node.isNullValue { return [:] }
        guard let hosts = node.mapping else {
            throw SettingsError("origins in \(file): expected hosts as keys, e.g. `cdn.example.com:` with `headers:` under it")
        }
        var origins: [String: HLSCacheSettings.OriginSettings] = [:]
        for (hostNode, settingsNode) in hosts {
            guard let host = hostNode.scalar?.string.lowercased(), !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }) else {
                throw SettingsError("origins in \(file): a host must be a name such as cdn.example.com or cdn.example.com:8443")
            }
            var origin = HLSCacheSettings.OriginSettings()
            if settingsNode.isNullValue {
                origins[host] = origin
                continue
            }
            guard let entries = settingsNode.mapping else {
                throw SettingsError("origins.\(host) in \(file): expected `headers:` and/or `cookies:` under it")
            }
            for (nameNode, fieldsNode) in entries {
                let section = nameNode.scalar?.string ?? ""
                guard section == "headers" || section == "cookies" else {
                    throw SettingsError("origins.\(host).\(section) in \(file): unknown key (expected headers or cookies)")
                }
                let fields = try self.fields(fieldsNode, key: "origins.\(host).\(section)", file: file, cookie: section == "cookies")
                if section == "headers" { origin.headers = fields } else { origin.cookies = fields }
            }
            origins[host] = origin
        }
        return origins
    }

    private static func fields(_ node: Node, key: String, file: String, cookie: Bool) throws(SettingsError) -> [HLSCacheSettings.Field] {
        if node.isNullValue { return [] }
        guard let mapping = node.mapping else { throw SettingsError("\(key) in \(file): expected NAME: VALUE lines under it") }
        var fields: [HLSCacheSettings.Field] = []
        for (nameNode, valueNode) in mapping {
            let name = nameNode.scalar?.string ?? ""
            let token =
                !name.isEmpty
                && name.utf8.allSatisfy {
                    $0 > 32 && $0 < 127 && $0 != UInt8(ascii: ":") && (!cookie || ($0 != UInt8(ascii: "=") && $0 != UInt8(ascii: ";")))
                }
            guard token else {
                throw SettingsError("\(key) in \(file): \(SettingText.quoted(name)) is not a valid \(cookie ? "cookie" : "header") name")
            }
            guard let value = valueNode.scalar?.string else { throw SettingsError("\(key).\(name) in \(file): expected a single value") }
            let bad = value.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) || (cookie && value.contains(";"))
            guard !bad else { throw SettingsError("\(key).\(name) in \(file): not a valid \(cookie ? "cookie" : "header") value") }
            fields.append(HLSCacheSettings.Field(name: name, value: value))
        }
        return fields
    }
}
