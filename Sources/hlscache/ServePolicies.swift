import HLSAdmin
import HLSConfig
import HLSDownloader
import Logging
import NIOConcurrencyHelpers

/// The download policies of `serve` (`/api/v1/policies`, `hlscache policy`): the configured settings with the
/// overrides stored in the cache directory's `policies.json` on top. A stored value wins over the config file, the
/// environment and the flags (at start and on reload) until it is reset (docs/api.md#policies).
final class ServePolicies: Sendable {
    private struct State {
        /// The settings of the configuration (file, environment, flags), without the overrides.
        var configured: HLSCacheSettings
        var stored: RuntimePolicies
    }

    private let state: NIOLockedValueBox<State>
    private let directory: String
    private let downloader: Downloader

    /// `stored`: the overrides read from `directory` (``stored(directory:logger:)``).
    init(directory: String, configured: HLSCacheSettings, stored: RuntimePolicies, downloader: Downloader) {
        self.state = NIOLockedValueBox(State(configured: configured, stored: stored))
        self.directory = directory
        self.downloader = downloader
    }

    /// The overrides of `directory` that apply over `configured`; an unreadable file or a value refused now is
    /// logged and left out (the configured values run), never a reason not to start.
    static func stored(directory: String, configured: HLSCacheSettings, logger: Logger) -> RuntimePolicies {
        do throws(SettingsError) {
            let stored = try RuntimePolicies.load(directory: directory)
            _ = try stored.applied(to: configured)
            return stored
        } catch {
            logger.warning("policies ignored: \(error.message)")
            return RuntimePolicies()
        }
    }

    var control: PolicyControl {
        PolicyControl(current: { self.view() }, change: { await self.change($0) })
    }

    /// A reload read `configured`: the settings to apply, the overrides on top (read again from the file, which
    /// `hlscache policy set` writes before it signals). `changed`: whether the stored overrides changed.
    func reloaded(_ configured: HLSCacheSettings) -> (settings: HLSCacheSettings, changed: Bool) {
        let onDisk = try? RuntimePolicies.load(directory: directory)
        return state.withLockedValue { state in
            state.configured = configured
            let before = state.stored
            if let onDisk, (try? onDisk.applied(to: configured)) != nil { state.stored = onDisk }
            return ((try? state.stored.applied(to: configured)) ?? configured, state.stored != before)
        }
    }

    /// After a reload whose stored overrides changed: the downloader gets the policies, subscribers the event.
    func applyReloaded(_ effective: HLSCacheSettings, announce: (PolicyControl.View) -> Void) async {
        let downloads = effective.downloaderConfiguration()
        await downloader.reconfigure(downloads)
        announce(view())
    }

    private func view() -> PolicyControl.View {
        state.withLockedValue { state in
            let effective = (try? state.stored.applied(to: state.configured)) ?? state.configured
            return PolicyControl.View(policies: RuntimePolicies.effective(effective), overrides: state.stored.values)
        }
    }

    private func change(_ changes: [String: String]) async -> Result<PolicyControl.View, PolicyRefusal> {
        let outcome: Result<(HLSCacheSettings, RuntimePolicies), PolicyRefusal> = state.withLockedValue { state in
            do {
                let next = try state.stored.changing(changes, over: state.configured)
                let effective = try next.applied(to: state.configured)
                try next.save(directory: directory)
                state.stored = next
                return .success((effective, next))
            } catch let error as SettingsError {
                return .failure(PolicyRefusal(error.message))
            } catch {
                return .failure(PolicyRefusal("cannot store \(RuntimePolicies.fileName): \(error)"))
            }
        }
        switch outcome {
        case .success(let (effective, stored)):
            let downloads = effective.downloaderConfiguration()
            await downloader.reconfigure(downloads)
            return .success(PolicyControl.View(policies: RuntimePolicies.effective(effective), overrides: stored.values))
        case .failure(let refusal):
            return .failure(refusal)
        }
    }
}
