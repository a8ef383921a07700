import ArgumentParser
import Dispatch
import Foundation
import HLSDownloader
import Synchronization

/// Runs one item in this process until it settles (`fetch`, `resume`): SIGINT/SIGTERM interrupt it (it
/// becomes `idle` and resumes on the next `fetch`, `resume` or `serve`), the summary and exit status follow
/// the final state.
///
/// When another live process downloads the item, this one follows its progress until it settles; if that
/// process dies meanwhile (killed, a zombie) or stops without settling it (`idle`, `queued`), this one takes the
/// download over, as the next command would.
/// The write end of the pipe the SIGINT/SIGTERM handler writes to; set before the handler is installed.
nonisolated(unsafe) private var signalPipeWrite: Int32 = -1

/// Cancels a run's task on SIGINT/SIGTERM, also when the signal came before the task was attached.
///
/// The handlers are installed with signal(2), in place when ``installHandlers()`` returns, and write a byte to a pipe
/// that a thread of its own reads. (A DispatchSource registers its signal asynchronously, on the dispatch manager:
/// with SIG_IGN set meanwhile, a signal that came in that window was discarded — a follower interrupted right after
/// its first progress line followed on as if nothing had been pressed.)
private final class SignalCancellation: Sendable {
    private struct State {
        var task: Task<DownloadItem, any Error>?
        var signalled = false
    }

    private let state = Mutex(State())

    func installHandlers() {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return }
        signalPipeWrite = fds[1]
        let readEnd = fds[0]
        Thread.detachNewThread { [self] in
            var byte: UInt8 = 0
            while true {
                let count = read(readEnd, &byte, 1)
                if count == 1 {
                    cancel()
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
        for number in [SIGINT, SIGTERM] {
            signal(number) { _ in
                var byte: UInt8 = 1
                _ = write(signalPipeWrite, &byte, 1)
            }
        }
    }

    func cancel() {
        let task = state.withLock { state in
            state.signalled = true
            return state.task
        }
        task?.cancel()
    }

    func attach(_ task: Task<DownloadItem, any Error>) {
        let signalled = state.withLock { state in
            state.task = task
            return state.signalled
        }
        if signalled { task.cancel() }
    }
}

enum ForegroundDownload {
    static func run(_ id: String, context: ItemContext, printer: ProgressPrinter, proxyBase: String) async throws {
        // SIGINT/SIGTERM handling is in place before the run starts (SignalCancellation says why).
        let cancellation = SignalCancellation()
        cancellation.installHandlers()
        let task = Task { () async throws -> DownloadItem in
            while true {
                do {
                    let item = try await context.downloader.run(id)
                    // The origin is unavailable: wait for the item's next attempt, as `serve` would, then run it again.
                    guard item.state == .idle, item.nextAttemptAt != nil, !Task.isCancelled else { return item }
                    if let settled = try await waitForOrigin(item, context: context, printer: printer) { return settled }
                } catch let error as DownloadError where error == .invalidState {
                    // Another live process (a `serve`, another `fetch`) downloads it: follow its progress instead.
                    if let settled = try await follow(id, context: context, printer: printer) { return settled }
                    // Its owner left it waiting for the origin: wait for the same next attempt rather than try at once.
                    let current = try context.items.require(id)
                    if current.state == .idle, let next = current.nextAttemptAt, next > Date() {
                        if let settled = try await waitForOrigin(current, context: context, printer: printer) { return settled }
                    }
                    // Its owner is gone, or the attempt is due: claim it (another process may be quicker; then follow that one).
                }
            }
        }
        cancellation.attach(task)
        let item: DownloadItem
        do {
            item = try await task.value
        } catch let error as DownloadError where error == .unknownItem {
            // `rm` (or the API's DELETE) forgot the item while it ran: it was removed meanwhile, exit 0.
            printer.finishLine()
            printer.emit(
                printer.json ? ItemFormatter.json(["event": "done", "id": id, "state": "deleted", "removed": true]) : "\(id): removed")
            return
        }
        printer.finishLine()
        report(item, printer: printer, proxyBase: proxyBase, offline: try? context.downloader.offlineStatus(of: item))
        switch item.state {
        case .queued, .downloading:
            // Only a follower ends in these states: interrupted while another process downloads the item.
            if task.isCancelled {
                let owner = item.ownerPID.map { " by process \($0)" } ?? ""
                throw DownloadError.cancelled.with("interrupted; \(item.id) is still \(item.state.rawValue)\(owner)")
            }
            return
        case .cached, .partiallyCached, .paused, .deleted, .evicted, .ready:
            return
        case .idle:
            throw DownloadError.cancelled.with("interrupted; \(item.id) is idle and resumes with `hlscache resume \(item.id)` or `serve`")
        case .failed:
            throw (item.errorCode.flatMap(DownloadError.init(code:)) ?? DownloadError.network).with(
                item.errorMessage ?? "item \(item.id) failed")
        case .expired:
            throw DownloadError.expired.with("item \(item.id) expired")
        }
    }

    /// Prints "waiting for the origin" and waits until the item's next attempt is due.
    /// - Returns: `nil` to run it again (due, or taken out of `idle` by another process: the next run follows that
    ///   one); the item when this task is cancelled or the item was settled meanwhile (paused, deleted).
    private static func waitForOrigin(_ item: DownloadItem, context: ItemContext, printer: ProgressPrinter) async throws(DownloadError)
        -> DownloadItem?
    {
        guard let next = item.nextAttemptAt else { return nil }
        printer.finishLine()
        let reason = [item.errorCode, item.errorMessage].compactMap { $0 }.joined(separator: ": ")
        if printer.json {
            var object: [String: Any] = ["event": "waiting", "id": item.id, "nextAttemptAt": ItemFormatter.iso(next) ?? ""]
            if let code = item.errorCode { object["error"] = code }
            if let message = item.errorMessage { object["message"] = message }
            if let since = ItemFormatter.iso(item.interruptedAt) { object["since"] = since }
            printer.emit(ItemFormatter.json(object))
        } else {
            let wait = max(0, Int(next.timeIntervalSinceNow.rounded(.up)))
            if item.errorCode == DownloadError.dailyLimit.code || item.errorCode == DownloadError.outsideWindow.code {
                // A download policy, not the origin (docs/fetch.md#download-policies): --fail-fast does not apply.
                printer.emit("\(item.id): held back by a download policy (\(reason)); next attempt in \(wait) s (Ctrl-C to stop)")
            } else {
                printer.emit(
                    "\(item.id): waiting for the origin (\(reason)); next attempt in \(wait) s (Ctrl-C to stop; --fail-fast fails instead)")
            }
        }
        while Date() < next {
            do {
                try await Task.sleep(for: .milliseconds(min(250, max(1, Int(next.timeIntervalSinceNow * 1000)))))
            } catch {
                return try context.items.require(item.id)
            }
            let current = try context.items.require(item.id)
            switch current.state {
            case .idle: continue
            case .queued, .downloading: return nil
            default: return current
            }
        }
        return nil
    }

    /// Polls an item another process downloads until it settles.
    /// - Returns: the item once settled (or as it is when this task is cancelled); `nil` when this process should
    ///   take the download over: its owner died (the liveness check ``ItemStore/recoverInterrupted()`` makes) or
    ///   left it `idle` or `queued`.
    private static func follow(_ id: String, context: ItemContext, printer: ProgressPrinter) async throws(DownloadError) -> DownloadItem? {
        while true {
            let item = try context.items.require(id)
            switch item.state {
            case .downloading where !item.ownerIsAlive, .idle, .queued: return nil
            case .downloading: break
            default: return item
            }
            printer.handle(
                .progress(
                    id: id,
                    progress: DownloadProgress(
                        bytesDone: item.bytesDone, bytesTotal: item.bytesTotal, segmentsDone: item.segmentsDone,
                        segmentsTotal: item.segmentsTotal, bytesPerSecond: 0)))
            do { try await Task.sleep(for: .milliseconds(500)) } catch { return try context.items.require(id) }
        }
    }

    static func report(_ item: DownloadItem, printer: ProgressPrinter, proxyBase: String, offline: OfflineStatus? = nil) {
        if printer.json {
            var object = ItemFormatter.dictionary(item, proxyBase: proxyBase, offline: offline)
            object["event"] = "done"
            printer.emit(ItemFormatter.json(object))
        } else {
            printer.emit(
                "\(item.id): \(item.state.rawValue), \(ItemFormatter.bytes(item.bytesDone)), \(item.segmentsDone)/\(item.segmentsTotal) segments"
                    + (item.errorCode.map { " (\($0))" } ?? ""))
        }
    }
}
