/// What a reload (`SIGHUP`, `hlscache reload`) does with a newly loaded configuration: the settings it changes in
/// the running server, and those whose new value waits for a restart (docs/operations.md#reload).
///
/// A setting is compared by its rendered value (``SettingKey/fileValue(_:)``), so `10MiB` and `10485760` are the
/// same; the per-origin headers and cookies compare as one setting, `origins`.
package struct ReloadPlan: Sendable, Equatable {
    /// Settings whose new value the running server takes, in catalog order.
    package var applied: [String] = []
    /// Settings whose value in the file differs from the one the server runs with and that only a restart changes.
    package var needsRestart: [String] = []

    /// Settings a running server changes in place. Everything else needs a restart: the listen address and the
    /// cache directory by nature, the rest (sizes of the memory tier, timeouts read when a connection starts, the
    /// origin client's pool) because the objects built from them are not rebuilt while clients use them.
    package static let liveKeys: Set<String> = [
        "log.level", "downloads.rateLimit", "downloads.itemRate", "downloads.dailyLimit", "downloads.window",
        "downloads.maxItemSize", "downloads.concurrentItems", "downloads.defaultSeconds", "downloads.autoPurge", "keys.allow", "api.token",
        "api.allow", "http.allowedWebOrigins", originsKey,
    ]

    /// The name `origins` (the per-origin headers and cookies) takes in a plan.
    package static let originsKey = SettingCatalog.originsKey

    package init(applied: [String] = [], needsRestart: [String] = []) {
        self.applied = applied
        self.needsRestart = needsRestart
    }

    /// The plan that takes a server running with `running` to `loaded`.
    ///
    /// `log.level: trace` is never applied live: AsyncHTTPClient logs request and response bodies (keys) at trace, and
    /// the origin client keeps its logger at debug or above only when it starts at trace.
    package static func between(running: HLSCacheSettings, loaded: HLSCacheSettings) -> ReloadPlan {
        var plan = ReloadPlan()
        for key in SettingCatalog.all where key.fileValue(running) != key.fileValue(loaded) {
            let live = liveKeys.contains(key.name) && !(key.name == "log.level" && loaded.logLevel == "trace")
            if live {
                plan.applied.append(key.name)
            } else {
                plan.needsRestart.append(key.name)
            }
        }
        if running.origins != loaded.origins { plan.applied.append(originsKey) }
        return plan
    }

    /// `running` with the settings of this plan's ``applied`` taken from `loaded`: what the server runs with after
    /// the reload (the next reload compares against it).
    package func settings(running: HLSCacheSettings, loaded: HLSCacheSettings) -> HLSCacheSettings {
        var result = running
        for name in applied {
            switch name {
            case "log.level": result.logLevel = loaded.logLevel
            case "downloads.rateLimit": result.downloadRateLimit = loaded.downloadRateLimit
            case "downloads.itemRate": result.downloadItemRate = loaded.downloadItemRate
            case "downloads.dailyLimit": result.downloadDailyLimit = loaded.downloadDailyLimit
            case "downloads.window": result.downloadWindow = loaded.downloadWindow
            case "downloads.maxItemSize": result.downloadMaxItemBytes = loaded.downloadMaxItemBytes
            case "downloads.concurrentItems": result.downloadConcurrentItems = loaded.downloadConcurrentItems
            case "downloads.defaultSeconds": result.downloadDefaultSeconds = loaded.downloadDefaultSeconds
            case "downloads.autoPurge": result.downloadAutoPurge = loaded.downloadAutoPurge
            case "keys.allow": result.keysAllow = loaded.keysAllow
            case "api.token": result.apiToken = loaded.apiToken
            case "api.allow": result.apiAllow = loaded.apiAllow
            case "http.allowedWebOrigins": result.allowedWebOrigins = loaded.allowedWebOrigins
            case Self.originsKey: result.origins = loaded.origins
            default: break
            }
        }
        return result
    }
}
