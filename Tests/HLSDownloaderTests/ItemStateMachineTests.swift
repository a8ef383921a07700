import HLSDownloader
import HLSTestSupport
import Testing

@Suite struct ItemStateMachineTests {
    private func machine(_ state: ItemState) -> ItemStateMachine { ItemStateMachine(state: state) }

    @Test func happyPathToCachedAndPartiallyCached() throws {
        var m = machine(.queued)
        #expect(try m.handle(.start) == .startDownload)
        #expect(m.state == .downloading)
        #expect(try m.handle(.finish(partial: false)) == .persist)
        #expect(m.state == .cached)
        var p = machine(.downloading)
        _ = try p.handle(.finish(partial: true))
        #expect(p.state == .partiallyCached)
    }

    @Test func pauseAndResumeLoop() throws {
        var m = machine(.downloading)
        #expect(try m.handle(.pause) == .stopDownload)
        #expect(m.state == .paused)
        #expect(try m.handle(.resume) == .persist)
        #expect(m.state == .queued)
        _ = try m.handle(.start)
        #expect(m.state == .downloading)
    }

    @Test func interruptedItemsBecomeIdleAndRestart() throws {
        var m = machine(.downloading)
        #expect(try m.handle(.interrupt) == .stopDownload)
        #expect(m.state == .idle)
        #expect(try m.handle(.start) == .startDownload)
    }

    @Test func failureKeepsNoDownloadRunning() throws {
        var m = machine(.downloading)
        #expect(try m.handle(.fail(code: "http")) == .stopDownload)
        #expect(m.state == .failed)
        _ = try m.handle(.resume)
        #expect(m.state == .queued)
    }

    @Test func expiryAndDeletionEvictFromEveryLiveState() throws {
        for state in [ItemState.queued, .downloading, .paused, .idle, .cached, .partiallyCached, .failed] {
            var e = machine(state)
            #expect(try e.handle(.expire) == .stopAndEvict)
            #expect(e.state == .expired)
            var d = machine(state)
            #expect(try d.handle(.delete) == .stopAndEvict)
            #expect(d.state == .deleted)
        }
        var expired = machine(.expired)
        #expect(try expired.handle(.delete) == .stopAndEvict)
    }

    /// Eviction moves a complete item to partiallyCached (segments left) or evicted (none); resume queues it again;
    /// items that are not complete are refused (their counters change, not their state).
    @Test func evictionOfACompleteItem() throws {
        var cached = machine(.cached)
        #expect(try cached.handle(.evict(segmentsLeft: true)) == .persist)
        #expect(cached.state == .partiallyCached)
        #expect(try cached.handle(.evict(segmentsLeft: false)) == .persist)
        #expect(cached.state == .evicted)
        #expect(ItemState.evicted.isSettled && !ItemState.evicted.isRunnable)
        #expect(try cached.handle(.resume) == .persist)
        #expect(cached.state == .queued)
        for state in [ItemState.queued, .downloading, .paused, .idle, .failed, .expired, .deleted] {
            var m = machine(state)
            #expect(throws: DownloadError.invalidState) { try m.handle(.evict(segmentsLeft: false)) }
        }
        var evicted = machine(.evicted)
        #expect(try evicted.handle(.delete) == .stopAndEvict)
    }

    /// Every state × every event: the next state and the action the downloader runs (``Downloader`` runs them in one
    /// function: persist; stop this process's run; stop it and evict or release the item's objects), or a refusal.
    @Test func everyTransitionAndItsAction() throws {
        typealias Row = (ItemState, ItemStateMachine.Event, ItemState, ItemStateMachine.Action)
        let events: [ItemStateMachine.Event] = [
            .start, .pause, .resume, .interrupt, .finish(partial: false), .finish(partial: true), .fail(code: "http"),
            .evict(segmentsLeft: true), .evict(segmentsLeft: false), .expire, .delete, .hold,
        ]
        var allowed: [Row] = [
            (.queued, .start, .downloading, .startDownload), (.queued, .pause, .paused, .persist), (.queued, .resume, .queued, .persist),
            (.queued, .fail(code: "http"), .failed, .persist), (.queued, .hold, .idle, .persist),
            (.ready, .resume, .queued, .persist), (.ready, .fail(code: "http"), .failed, .persist),
            (.downloading, .pause, .paused, .stopDownload), (.downloading, .interrupt, .idle, .stopDownload),
            (.downloading, .finish(partial: false), .cached, .persist), (.downloading, .finish(partial: true), .partiallyCached, .persist),
            (.downloading, .fail(code: "http"), .failed, .stopDownload), (.downloading, .hold, .idle, .stopDownload),
            // A recording runs with the same transitions.
            (.recording, .pause, .paused, .stopDownload), (.recording, .interrupt, .idle, .stopDownload),
            (.recording, .finish(partial: false), .cached, .persist), (.recording, .finish(partial: true), .partiallyCached, .persist),
            (.recording, .fail(code: "http"), .failed, .stopDownload), (.recording, .hold, .idle, .stopDownload),
            (.paused, .resume, .queued, .persist), (.paused, .pause, .paused, .persist),
            (.idle, .start, .downloading, .startDownload), (.idle, .resume, .queued, .persist), (.idle, .pause, .paused, .persist),
            (.idle, .fail(code: "http"), .failed, .persist), (.idle, .hold, .idle, .persist),
            (.failed, .resume, .queued, .persist),
            // Again: what a run stored after another process expired or removed the item goes too.
            (.expired, .expire, .expired, .stopAndEvict), (.deleted, .delete, .deleted, .stopAndEvict),
            (.deleted, .resume, .queued, .persist),
        ]
        for complete in [ItemState.cached, .partiallyCached, .evicted] {
            allowed += [
                (complete, .resume, .queued, .persist), (complete, .evict(segmentsLeft: true), .partiallyCached, .persist),
                (complete, .evict(segmentsLeft: false), .evicted, .persist),
            ]
        }
        for state in ItemState.allCases where state != .expired && state != .deleted {
            allowed += [(state, .expire, .expired, .stopAndEvict), (state, .delete, .deleted, .stopAndEvict)]
        }
        allowed.append((.expired, .delete, .deleted, .stopAndEvict))
        for state in ItemState.allCases {
            for event in events {
                var m = machine(state)
                if let row = allowed.first(where: { $0.0 == state && $0.1 == event }) {
                    #expect(try m.handle(event) == row.3, "\(state) + \(event)")
                    #expect(m.state == row.2, "\(state) + \(event)")
                } else {
                    #expect(throws: DownloadError.invalidState, "\(state) + \(event)") { try m.handle(event) }
                    #expect(m.state == state)
                }
            }
        }
    }

    @Test func invalidTransitionsThrowAndKeepTheState() {
        let invalid: [(ItemState, ItemStateMachine.Event)] = [
            (.queued, .finish(partial: false)), (.downloading, .start), (.downloading, .resume), (.paused, .start),
            (.cached, .pause), (.cached, .start), (.failed, .finish(partial: true)), (.expired, .resume),
            (.deleted, .start), (.idle, .interrupt), (.partiallyCached, .fail(code: "http")),
        ]
        for (state, event) in invalid {
            var m = machine(state)
            #expect(throws: DownloadError.invalidState) { try m.handle(event) }
            #expect(m.state == state)
        }
    }

    @Test func runnableAndSettledStates() {
        #expect(ItemState.allCases.filter(\.isRunnable) == [.queued, .idle])
        #expect(!ItemState.downloading.isSettled && ItemState.paused.isSettled)
    }

    @Test func errorCodesRoundTrip() {
        for code in ["notFound", "network", "http", "timeout", "corrupted", "cacheFull", "cancelled", "keyUnavailable", "expired"] {
            #expect(DownloadError(code: code)?.code == code)
        }
        #expect(DownloadError(code: "nope") == nil)
        #expect(DownloadError.cacheFull.httpStatus == 507)
    }
}
