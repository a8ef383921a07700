import Dispatch
import Foundation
import HLSAdmin
import HLSConfig
import Logging

/// `serve`'s reload (`SIGHUP`, `hlscache reload`; docs/operations.md#reload): reads the config file and the
/// environment again with the same flags, and either refuses the result whole (one log line naming the key, as at
/// start-up; nothing changes) or applies the settings a running server can change and reports the others as
/// needing a restart, in the log and in `GET /api/v1/status`.
actor ConfigurationReloader {
    /// Changes the running server: the plan's ``ReloadPlan/applied`` settings, with their new values in the settings.
    typealias Apply = @Sendable (ReloadPlan, HLSCacheSettings) async -> Void
    /// Changes the configuration's part of `/status` (``AdminAPI/updateConfigurationStatus(_:)``, under its lock).
    typealias UpdateStatus = @Sendable (_ change: (inout ConfigurationStatus) -> Void) -> Void

    private let configFile: String?
    private let commandLine: CommandLineSettings
    private let logger: Logger
    private let status: UpdateStatus
    private let apply: Apply
    /// What the server runs with: the start's settings, with those reloads applied.
    private var running: HLSCacheSettings

    init(
        configFile: String?, commandLine: CommandLineSettings, running: HLSCacheSettings, logger: Logger,
        status: @escaping UpdateStatus, apply: @escaping Apply
    ) {
        self.configFile = configFile
        self.commandLine = commandLine
        self.running = running
        self.logger = logger
        self.status = status
        self.apply = apply
        status { $0 = ConfigurationStatus(file: configFile) }
    }

    /// One reload; reloads run one after the other.
    func reload() async {
        let loaded: LoadedSettings
        do {
            loaded = try SettingsLoader.load(
                configFile: configFile, environment: ProcessInfo.processInfo.environment, commandLine: commandLine)
        } catch {
            logger.error("reload refused, nothing changed: config error: \(error.message)")
            status {
                $0.lastError = error.message
                $0.refusedAt = Date()
            }
            return
        }
        let plan = ReloadPlan.between(running: running, loaded: loaded.settings)
        await apply(plan, loaded.settings)
        running = plan.settings(running: running, loaded: loaded.settings)
        let applied = plan.applied.isEmpty ? "nothing changed" : "applied " + plan.applied.joined(separator: ", ")
        if plan.needsRestart.isEmpty {
            logger.notice("reloaded \(configFile ?? "the environment"): \(applied)")
        } else {
            logger.warning(
                "reloaded \(configFile ?? "the environment"): \(applied); needs a restart: \(plan.needsRestart.joined(separator: ", "))")
        }
        status {
            $0.reloads += 1
            $0.reloadedAt = Date()
            $0.applied = plan.applied
            $0.needsRestart = plan.needsRestart
            $0.lastError = nil
            $0.refusedAt = nil
        }
    }

    /// Reloads on every `SIGHUP` until the returned source is cancelled. `SIGHUP`'s default action (ending the process)
    /// is replaced by ``ignoreHangUp()``, which `serve` calls first thing.
    nonisolated func listen() -> any DispatchSourceSignal {
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "hlscache.reload"))
        source.setEventHandler { Task { await self.reload() } }
        source.resume()
        return source
    }

    /// Keeps `SIGHUP` from ending the process (before the reload handler exists, one is ignored).
    static func ignoreHangUp() {
        signal(SIGHUP, SIG_IGN)
    }
}
