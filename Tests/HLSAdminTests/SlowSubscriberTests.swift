import Foundation
import HLSAdmin
import HLSDownloader
import HLSTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Admin API: a subscriber that does not read")
struct SlowSubscriberTests {
    @Test("an /events client that never reads holds a bounded buffer and stalls neither requests nor downloads")
    func slowSubscriber() async throws {
        let root = try await Streams.stream("ts-variants-audio-group") { try FFmpeg.makeTSVariants(in: $0) }
        let capacity = 64
        let h = try await AdminHarness(root: root) { $0.maxBufferedEvents = capacity }
        defer { h.shutdownLater() }
        // A client that asks for events and never reads them (a tiny receive buffer fills at once).
        let port = h.port
        let fd = try await offThread { () throws -> Int32 in
            let fd = try RawSocket.connect(port: port, receiveBuffer: 4096)
            RawSocket.send(fd, Array("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8))
            return fd
        }
        defer { close(fd) }
        _ = try await h.eventually("the silent subscriber") { h.hub.subscriberCount == 1 ? true : nil }

        // Flood with progress events (about 2 KB each) until the silent client's socket is full and its queue
        // reaches its bound; bounded number of rounds.
        let padding = String(repeating: "p", count: 2000)
        var rounds = 0
        while h.hub.largestBacklog < capacity && rounds < 400 {
            for n in 0..<2000 {
                h.hub.send(
                    .progress(id: "flood-\(n % 500)-\(padding)", bytes: Int64(rounds), bytesTotal: 1000, segments: 0, segmentsTotal: 10))
            }
            rounds += 1
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(h.hub.largestBacklog == capacity, "the silent subscriber's queue filled up to its bound after \(rounds) rounds")

        // The server still answers, and a download runs to the end with its events reaching the reading client.
        let reader = EventRecorder(client: h.client, url: h.api("/events"))
        _ = try await h.eventually("the reading subscriber") { h.hub.subscriberCount == 2 ? true : nil }
        let listed = try await h.request(.GET, h.api("/items"))
        #expect(listed.status == 200)
        let created = try await h.request(
            .POST, h.api("/items"), json: #"{"url":"\#(h.originURL("/v0/index.m3u8"))","id":"while-flooded"}"#)
        #expect(created.status == 201)
        _ = try await h.eventually("the download") { reader.states(of: "while-flooded").last == "cached" ? true : nil }
        #expect(h.hub.largestBacklog <= capacity)
        let segment = try await h.request(.GET, h.proxyURL("/v0/seg000.ts"))
        #expect(segment.status == 200 && segment.headers.first(name: "X-Cache") == "HIT")

        await reader.stop()
        await h.shutdown()
    }
}
