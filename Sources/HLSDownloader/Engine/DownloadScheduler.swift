import Foundation
import Logging

/// Runs queued and interrupted items in the background of `hlscache serve`: every poll it recovers items
/// whose process died, expires items past their expiry (and, with auto-purge, removes the unlocked ones), and starts
/// runnable items (`queued`, `idle`) until ``DownloaderConfiguration/concurrentItems`` run at once (read each poll:
/// a change applies at the next one).
package actor DownloadScheduler {
    private let downloader: Downloader
    private let pollInterval: Duration
    private var running: [String: Task<Void, Never>] = [:]
    /// Whether auto-purge was on at the last poll (off at first: the first poll with it on sweeps).
    private var purgeWasOn = false
    private var pollsSincePurge = 0
    /// Polls between two sweeps of auto-purge when nothing expired here.
    private static let purgeSweepInterval = 60

    /// A scheduler polling the items table every `pollInterval`.
    package init(downloader: Downloader, pollInterval: Duration = .seconds(1)) {
        self.downloader = downloader
        self.pollInterval = pollInterval
    }

    /// Polls until the calling task is cancelled, then cancels the downloads it started (they become `idle`)
    /// and waits for them.
    package func run() async {
        while !Task.isCancelled {
            tick()
            try? await Task.sleep(for: pollInterval)
        }
        let tasks = Array(running.values)
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
    }

    /// One poll. Returns how many items run after it (read in the same actor turn: none can have finished).
    @discardableResult
    package func tick() -> Int {
        poll()
        return running.count
    }

    private func poll() {
        do {
            try downloader.items.recoverInterrupted()
            let expired = try downloader.expireDue()
            autoPurge(after: expired)
            // Expired key copies are never served again: drop their sealed bytes.
            _ = try? downloader.keys.purgeExpired()
            let capacity = downloader.configuration.concurrentItems - running.count
            guard capacity > 0 else { return }
            for item in try downloader.items.runnable(limit: capacity, excluding: Set(running.keys), now: downloader.now) {
                let id = item.id
                running[id] = Task {
                    do {
                        try await downloader.run(id)
                    } catch {
                        downloader.logger.debug("scheduler could not run item \(id): \(error)")
                    }
                    self.finished(id)
                }
            }
        } catch {
            downloader.logger.warning("download scheduler: \(error)")
        }
    }

    /// `downloads.autoPurge`: the expired unlocked items are removed when this poll expired some, when the policy
    /// has just been turned on (items expired before), and every ``purgeSweepInterval`` polls (items another process
    /// expired); not every poll: the sweep reads the whole items table.
    private func autoPurge(after expired: [String]) {
        let on = downloader.configuration.autoPurgeExpired
        defer { purgeWasOn = on }
        guard on else { return }
        pollsSincePurge += 1
        guard !expired.isEmpty || !purgeWasOn || pollsSincePurge >= Self.purgeSweepInterval else { return }
        pollsSincePurge = 0
        do {
            try downloader.purgeExpiredUnlocked()
        } catch {
            downloader.logger.warning("auto-purge: \(error)")
        }
    }

    private func finished(_ id: String) {
        running[id] = nil
    }

    /// The ids of the items this scheduler is downloading now.
    package var active: [String] { Array(running.keys) }
}
