import Logging
import ServiceLifecycle

/// Renews stored keys shortly before they expire, while the origin answers (`serve --key-auto-renew MINUTES`),
/// so a box that goes offline holds keys valid for as long as possible. Runs in the server's `ServiceGroup`.
package struct KeyRenewalService: Service {
    let keys: KeyService
    let before: Duration
    let interval: Duration

    /// - Parameters:
    ///   - before: renew keys expiring within this window.
    ///   - interval: how often to look; default a quarter of `before`, between 1 s and 60 s.
    package init(keys: KeyService, before: Duration, interval: Duration? = nil) {
        self.keys = keys
        self.before = before
        self.interval = interval ?? min(.seconds(60), max(.seconds(1), before / 4))
    }

    package func run() async throws {
        let (keys, before, interval) = (self.keys, self.before, self.interval)
        do {
            try await cancelWhenGracefulShutdown {
                while !Task.isCancelled {
                    _ = await keys.renewDue(within: before)
                    try await Task.sleep(for: interval)
                }
            }
        } catch is CancellationError {
            // Shutting down: a renewal in flight was given up, which is harmless.
        }
    }
}
