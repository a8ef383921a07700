/// `hlscache serve --print-config`: every setting in effect, one per line, with where it came from.
///
/// ```
/// # hlscache configuration (config file: /etc/hlscache/hlscache.yaml)
/// listen = 127.0.0.1:8080  # default
/// cache.maxSize = 20GiB  # /etc/hlscache/hlscache.yaml
/// log.level = debug  # env HLSCACHE_LOG_LEVEL
/// origins.cdn.example.com.headers.X-Token = ********  # /etc/hlscache/hlscache.yaml
/// ```
///
/// Secrets (`api.token`, origin header values and cookies) are masked.
extension LoadedSettings {
    package func printableConfiguration(environment: [String: String]) -> String {
        var lines = ["# hlscache configuration (config file: \(configFile ?? "none"))"]
        for key in SettingCatalog.all {
            var value = key.displayValue(settings)
            if key.name == "cache.dir", settings.cacheDirectory == nil {
                value = "~  (\(settings.resolvedCacheDirectory(environment: environment)))"
            }
            lines.append("\(key.name) = \(value)  # \(sources[key.name] ?? "default")")
        }
        for host in settings.origins.keys.sorted() {
            guard let origin = settings.origins[host] else { continue }
            for (section, fields) in [("headers", origin.headers), ("cookies", origin.cookies)] {
                for field in fields {
                    let path = "origins.\(host).\(section).\(field.name)"
                    lines.append("\(path) = ********  # \(sources[path] ?? "default")")
                }
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
