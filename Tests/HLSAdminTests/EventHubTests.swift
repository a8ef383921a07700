import Foundation
import HLSAdmin
import HLSDownloader
import NIOConcurrencyHelpers
import Testing

/// The event hub's two sources — the downloader's events and polls of `items.sqlite` — racing: each state is announced
/// once and the last one sent is the item's state. A real items file; the polls are driven by hand.
@Suite("Event hub: events and polls racing")
struct EventHubTests {
    /// Every event the hub sent, as "id state" for state events.
    final class Recorder: Sendable {
        let events = NIOLockedValueBox<[AdminEvent]>([])
        var states: [String] {
            events.withLockedValue { events in
                events.compactMap { event in
                    if case .state(let id, let state, _) = event { "\(id) \(state.rawValue)" } else { nil }
                }
            }
        }
    }

    static func store() throws -> (ItemStore, URL) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-hub-\(UUID().uuidString)")
        return (try ItemStore(directory: directory.path), directory)
    }

    @Test("A first poll that read the table before a downloader event keeps the event's state (no second `downloading`)")
    func firstPollOlderThanAnEvent() throws {
        let (items, directory) = try Self.store()
        defer { try? FileManager.default.removeItem(at: directory) }
        let hub = EventHub()
        let recorder = Recorder()
        hub.observe { event in recorder.events.withLockedValue { $0.append(event) } }
        let feed = ItemChangeFeed(items: items)

        let item = DownloadItem(id: "a", url: "http://127.0.0.1:9/a.m3u8")
        try items.insert(item)
        hub.itemChanged(item)  // the API announces what it created
        // The poller's first read begins and sees `queued`; the scheduler claims the item and announces it before
        // the poller hands its read to the hub (a busy machine).
        let firstReadAt = ContinuousClock.now
        let first = try feed.next()
        #expect(first.isFirst && first.changed.map(\.state) == [.queued])
        let claimed = try #require(try items.claim("a"))
        hub.publish(.stateChanged(id: "a", state: claimed.state, errorCode: nil))
        hub.poll(first, readAt: firstReadAt)
        // The next poll reads `downloading`: already announced.
        let secondReadAt = ContinuousClock.now
        hub.poll(try feed.next(), readAt: secondReadAt)
        #expect(recorder.states == ["a queued", "a downloading"])

        _ = try items.apply(.finish(partial: true), to: "a")
        hub.publish(.stateChanged(id: "a", state: .partiallyCached, errorCode: nil))
        hub.poll(try feed.next(), readAt: .now)
        #expect(recorder.states == ["a queued", "a downloading", "a partiallyCached"])
    }

    @Test("An event decided while a poll is sending its events is sent after them: the last state sent is the item's")
    func eventsLeaveInTheOrderDecided() throws {
        let (items, directory) = try Self.store()
        defer { try? FileManager.default.removeItem(at: directory) }
        // The other thread's publish tells when it has come to wait for its turn: the race is reached every run.
        let arrived = DispatchSemaphore(value: 0)
        let hub = EventHub(beforeSending: { _ in arrived.signal() })
        let recorder = Recorder()
        let feed = ItemChangeFeed(items: items)
        for id in ["x", "y"] { try items.insert(DownloadItem(id: id, url: "http://127.0.0.1:9/\(id).m3u8")) }
        hub.poll(try feed.next(), readAt: .now)  // the first poll learns both
        // Another process claims both; the next poll decides two events, x's then y's.
        _ = try #require(try items.claim("x"))
        _ = try #require(try items.claim("y"))
        let changes = try feed.next()
        #expect(changes.changed.map(\.id) == ["x", "y"])

        // While the poll sends x's event, y finishes in this process and its event is published from another thread.
        let started = NIOLockedValueBox(false)
        let overtook = NIOLockedValueBox(false)
        let published = DispatchSemaphore(value: 0)
        hub.observe { event in
            recorder.events.withLockedValue { $0.append(event) }
            guard case .state("x", .downloading, _) = event,
                !started.withLockedValue({
                    let was = $0; $0 = true; return was
                })
            else {
                return
            }
            Thread.detachNewThread {
                hub.publish(.stateChanged(id: "y", state: .partiallyCached, errorCode: nil))
                published.signal()
            }
            // The other thread is at the hub's door while this poll is still sending (a barrier, however slow the
            // machine). Then it gets a second to overtake, which it must not take: without the order held, it sends
            // y's `partiallyCached` at once and the poll's `downloading` for y follows it. (With the order held it
            // cannot publish before this returns: the wait always runs out, and the test never depends on it.)
            #expect(arrived.wait(timeout: .now() + 60) == .success, "the other thread reached publish")
            if published.wait(timeout: .now() + 1) == .success { overtook.withLockedValue { $0 = true } }
        }
        hub.poll(changes, readAt: .now)
        #expect(!overtook.withLockedValue { $0 }, "the other thread's event left while the poll was sending")
        if !overtook.withLockedValue({ $0 }) {
            #expect(published.wait(timeout: .now() + 60) == .success, "the other thread's publish returned")
        }
        #expect(recorder.states == ["x downloading", "y downloading", "y partiallyCached"])
    }
}
