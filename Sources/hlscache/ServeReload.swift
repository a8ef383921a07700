import HLSAdmin
import HLSConfig
import HLSDownloader
import HLSKeys
import HLSOrigin
import HLSProxy
import Logging

/// What a reload changes in a running `serve`: the settings of ``ReloadPlan/liveKeys``, each in the object that
/// reads it (docs/operations.md#reload).
enum ServeReload {
    /// The parts of the running server a reload reaches.
    struct Targets: Sendable {
        var downloader: Downloader
        var keys: KeyService
        var admin: AdminAPI
        var server: ProxyServer
        /// The proxy's origin client (keys use it too) and the downloads'.
        var origins: [OriginClient]
        /// Asks the download scheduler to look at the items again (a policy may let held items go).
        var wake: @Sendable () -> Void
    }

    static func apply(_ plan: ReloadPlan, _ settings: HLSCacheSettings, to targets: Targets) async {
        let changed = Set(plan.applied)
        if changed.contains("log.level") {
            LiveLevelLogHandler.setLevel(Logger.Level(rawValue: settings.logLevel) ?? .info)
        }
        if !changed.isDisjoint(with: [
            "downloads.rateLimit", "downloads.itemRate", "downloads.dailyLimit", "downloads.window", "downloads.maxItemSize",
            "downloads.concurrentItems", "downloads.defaultSeconds", "downloads.autoPurge",
        ]) {
            let downloads = settings.downloaderConfiguration()
            await targets.downloader.reconfigure(downloads)
            targets.wake()
        }
        if changed.contains("keys.allow") {
            targets.keys.setAccess(settings.keyConfiguration().access)
        }
        if changed.contains("api.token") || changed.contains("api.allow") {
            targets.admin.setAccess(token: settings.apiToken, allowedNetworks: settings.apiAllow.compactMap(IPNetwork.init))
        }
        if changed.contains("http.allowedWebOrigins") {
            targets.server.setWebOrigins(settings.webOriginPolicy)
        }
        if changed.contains(ReloadPlan.originsKey) {
            let origin = settings.originConfiguration()
            for client in targets.origins { client.setOriginFields(headers: origin.originHeaders, cookies: origin.originCookies) }
        }
    }
}
