import Foundation
import Synchronization
import HLSDownloader
import NIOConcurrencyHelpers

/// Prints downloader events: a rewritten progress line on a terminal, JSON lines with `--json`, nothing else
/// otherwise (the final summary is printed by the command).
final class ProgressPrinter: Sendable {
    let json: Bool
    private let terminal: Bool
    /// When the progress line was last drawn: nanoseconds since ``started`` plus one (0: never).
    private let lastLine = Atomic<Int64>(0)
    private let started = ContinuousClock.now

    init(json: Bool) {
        self.json = json
        terminal = isatty(STDOUT_FILENO) == 1
    }

    func handle(_ event: DownloadEvent) {
        switch event {
        case .stateChanged(let id, let state, let code):
            if json {
                var object: [String: Any] = ["event": "state", "id": id, "state": state.rawValue]
                if let code { object["error"] = code }
                emit(ItemFormatter.json(object))
            }
        case .planned(let id, let resources, let segments, let estimate):
            if json {
                var object: [String: Any] = ["event": "planned", "id": id, "resources": resources, "segments": segments]
                if let estimate { object["estimatedBytes"] = estimate }
                emit(ItemFormatter.json(object))
            }
        case .note(let id, let message):
            if json {
                emit(ItemFormatter.json(["event": "note", "id": id, "message": message]))
            } else {
                finishLine()
                emit("note: " + message)
            }
        case .evicted(let id, let state, let resources, _, _):
            if json {
                emit(ItemFormatter.json(["event": "evicted", "id": id, "state": state.rawValue, "resources": resources]))
            }
        case .progress(let id, let progress):
            if json {
                emit(ItemFormatter.progressJSON(id: id, progress))
            } else if terminal {
                // At most 10 redraws a second.
                let elapsed = started.duration(to: .now).components
                let now = elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000 + 1
                let last = lastLine.load(ordering: .relaxed)
                let draw =
                    (last == 0 || now - last >= 100_000_000 || progress.segmentsDone >= progress.segmentsTotal)
                    && lastLine.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
                if draw { write("\r\u{1B}[K" + ItemFormatter.progressLine(progress)) }
            }
        }
    }

    /// Ends the progress line before the summary.
    func finishLine() {
        if terminal && !json && lastLine.load(ordering: .relaxed) != 0 { write("\n") }
    }

    func emit(_ line: String) {
        write(line + "\n")
    }

    private func write(_ text: String) {
        ConsoleOutput.write(text)
    }
}
