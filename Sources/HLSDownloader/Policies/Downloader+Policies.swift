import Foundation

extension Downloader {
    /// The time the download policies are judged at (``DownloadPolicies/clock``).
    package var now: Date { configuration.policies.clock() }

    /// The item's maximum size: its own, else `downloads.maxItemSize`.
    package func maxBytes(for item: DownloadItem) -> Int64? {
        item.maxBytes ?? configuration.policies.maxItemBytes
    }

    /// The bytes fetched from origins today by every process on this cache directory.
    package func volumeToday() -> Int64 {
        usedVolume(policies: configuration.policies, force: true)
    }

    /// Why `item` may not download now, and when it may: outside its download hours (when this process keeps to
    /// them), the day's volume used up (every download's, or the item's own). `nil` when it may.
    package func policyHold(for item: DownloadItem) -> (reason: DownloadError, until: Date)? {
        let policies = configuration.policies
        let now = policies.clock()
        if policies.enforcesWindow, let window = item.downloadWindow ?? policies.window, !window.contains(now, timeZone: policies.timeZone)
        {
            let opens = window.nextOpening(after: now, timeZone: policies.timeZone)
            let whose = item.downloadWindow != nil ? "the item's window" : "downloads.window"
            return (
                DownloadError.outsideWindow.with(
                    "outside the download hours \(window) (\(whose), \(policies.timeZone.identifier)); waiting until \(opens.ISO8601Format())"
                ),
                opens
            )
        }
        if let limit = policies.dailyBytes {
            let used = usedVolume(policies: policies, force: true)
            if used >= limit {
                let next = policies.nextDay(after: now)
                return (
                    DownloadError.dailyLimit.with(
                        "the day's download volume is used up (\(Self.format(used)) of \(Self.format(limit)), downloads.dailyLimit); waiting until \(next.ISO8601Format())"
                    ),
                    next
                )
            }
        }
        if let limit = item.dailyBytes {
            let used = (try? items.itemVolume(item.id, day: policies.day(of: now))) ?? 0
            if used >= limit {
                let next = policies.nextDay(after: now)
                return (
                    DownloadError.dailyLimit.with(
                        "the item's daily download volume is used up (\(Self.format(used)) of \(Self.format(limit)), its dailyLimit); waiting until \(next.ISO8601Format())"
                    ),
                    next
                )
            }
        }
        return nil
    }

    /// Adds what this run fetched since the last time to the item's count for today (its own daily limit); a failed
    /// write keeps the bytes for the next time.
    func recordItemVolume(of id: String, counter: RunCounter) {
        let bytes = counter.takeUnrecorded()
        guard bytes > 0 else { return }
        let policies = configuration.policies
        do {
            try items.addItemVolume(bytes, item: id, day: policies.day(of: policies.clock()))
        } catch {
            counter.giveBack(bytes)
            logger.warning("item \(id): cannot count its download volume: \(error)")
        }
    }

    /// `fetch --dry-run`, `POST /items` with `"dryRun": true`: the item's plan read from the origin (nothing stored), and
    /// why a download would be refused (``DownloadError/tooLarge``, ``DownloadError/cacheFull``), if it would.
    package func dryRun(_ item: DownloadItem) async throws(DownloadError) -> (plan: DownloadPlan, refusal: DownloadError?) {
        let plan = try await makePlan(for: item, storing: false)
        do {
            try checkSize(plan, for: item)
            try checkFits(plan)
            return (plan, nil)
        } catch {
            return (plan, error)
        }
    }

    /// Refuses a plan whose estimate is larger than the item's maximum size.
    /// - Throws: ``DownloadError/tooLarge``.
    package func checkSize(_ plan: DownloadPlan, for item: DownloadItem) throws(DownloadError) {
        guard let limit = maxBytes(for: item), let estimate = plan.estimatedBytes, estimate > limit else { return }
        throw DownloadError.tooLarge.with(
            "the estimate (\(Self.format(estimate))) is more than the item's maximum size (\(Self.format(limit))\(item.maxBytes == nil ? ", downloads.maxItemSize" : ""))"
        )
    }

    /// Between two resources of a run: the item's maximum size (what it had stored when the run began plus what this
    /// run fetched), its download hours and the day's volume.
    /// - Throws: ``DownloadError/tooLarge`` (the item fails), ``DownloadError/outsideWindow`` or
    ///   ``DownloadError/dailyLimit`` (the item waits in `idle`).
    func checkPolicies(during item: DownloadItem, counter: RunCounter, bytesAtStart: Int64) throws(DownloadError) {
        if let limit = maxBytes(for: item), bytesAtStart + counter.total > limit {
            throw DownloadError.tooLarge.with(
                "the download passed the item's maximum size (\(Self.format(limit))\(item.maxBytes == nil ? ", downloads.maxItemSize" : ""))"
            )
        }
        // An item with its own daily limit has its count brought up to date first (a write between resources); the
        // others' counts are written when the run ends.
        if item.dailyBytes != nil { recordItemVolume(of: item.id, counter: counter) }
        if let (reason, _) = policyHold(for: item) { throw reason }
        if configuration.policies.dailyBytes == nil {
            // Counted anyway (`GET /status`), at most once a second.
            _ = usedVolume(policies: configuration.policies, force: false)
        }
    }

    /// Puts the item in `idle` with the policy as its reason and its next attempt at `until`.
    func hold(_ id: String, _ reason: DownloadError, until: Date) throws(DownloadError) -> DownloadItem {
        let now = self.now
        let item = try transition(id, .hold) { item in
            item.errorCode = reason.code
            item.errorMessage = reason.message
            item.nextAttemptAt = until
            item.interruptedAt = item.interruptedAt ?? now
        }
        logger.notice("item \(id) is held back: \(reason.message)")
        return item
    }
}
