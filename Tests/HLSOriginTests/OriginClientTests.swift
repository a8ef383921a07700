import Foundation
import HLSCacheCore
import HLSOrigin
import HLSTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@Suite("OriginClient against a real origin on 127.0.0.1")
struct OriginClientTests {
    @Test func fetchReturnsTheWholeBody() async throws {
        try await withOrigin { origin, client, _ in
            let response = try await client.fetch(origin.url("/bytes/70000"), maxBytes: 1 << 20)
            #expect(response.status == 200)
            #expect(response.head.contentLength == 70000)
            #expect(sameBytes(Array(response.body.readableBytesView), TestOrigin.patternBytes(0..<70000)))
        }
    }

    @Test func streamDeliversHeadBodyAndOneFinish() async throws {
        try await withOrigin { origin, client, group in
            let handler = await streamRecording(client, origin.url("/bytes/100000"), group: group)
            let record = handler.snapshot
            #expect(record.heads.map(\.status) == [200])
            #expect(sameBytes(record.body, TestOrigin.patternBytes(0..<100000)))
            #expect(record.finishes.count == 1)
            #expect(handler.error == nil)
        }
    }

    @Test func headRequestHasNoBody() async throws {
        try await withOrigin { origin, client, group in
            let handler = await streamRecording(client, origin.url("/bytes/5000"), method: .HEAD, group: group)
            #expect(handler.snapshot.heads.first?.contentLength == 5000)
            #expect(handler.snapshot.body.isEmpty)
            #expect(handler.error == nil)
        }
    }

    @Test func backpressureDeliversEveryByteInOrder() async throws {
        try await withOrigin { origin, client, group in
            let size = 2 << 20
            let handler = await streamRecording(client, origin.url("/bytes/\(size)"), group: group, delay: .milliseconds(1))
            let record = handler.snapshot
            #expect(handler.error == nil)
            #expect(record.body.count == size)
            #expect(sameBytes(record.body, TestOrigin.patternBytes(0..<size)))
            #expect(record.chunks > 1)
            #expect(record.overlapping == 0, "a chunk arrived before the previous chunk's future completed")
        }
    }

    @Test func originHeadersCookiesAndUserAgentAreSent() async throws {
        try await withOrigin { configuration in
            configuration.originHeaders["127.0.0.1"] = [
                (name: "X-Origin-Token", value: "abc"), (name: "Referer", value: "https://player.example/"),
            ]
            configuration.originCookies["127.0.0.1"] = [(name: "session", value: "s1"), (name: "cdn", value: "c2")]
            configuration.originHeaders["other.example"] = [(name: "X-Leak", value: "no")]
        } _: { origin, client, _ in
            let response = try await client.fetch(origin.url("/echo"), headers: [("If-None-Match", "\"v1\"")], maxBytes: 1 << 16)
            let text = String(buffer: response.body)
            #expect(text.contains("user-agent: \(HLSCacheVersion.userAgent)\n"))
            #expect(text.contains("x-origin-token: abc\n"))
            #expect(text.contains("referer: https://player.example/\n"))
            #expect(text.contains("cookie: session=s1; cdn=c2\n"))
            #expect(text.contains("if-none-match: \"v1\"\n"))
            #expect(!text.contains("x-leak"))
        }
    }

    /// Requests say `Accept-Encoding: identity` unless the caller asks for compression (playlists do); a caller's
    /// own header wins over both.
    @Test func acceptEncodingIsIdentityUnlessAsked() async throws {
        try await withOrigin { origin, client, _ in
            let plain = String(buffer: try await client.fetch(origin.url("/echo"), maxBytes: 1 << 16).body)
            #expect(plain.contains("accept-encoding: identity\n"), "\(plain)")
            let compressed = String(
                buffer: try await client.fetch(origin.url("/echo"), headers: [OriginClient.acceptCompressed], maxBytes: 1 << 16).body)
            #expect(compressed.contains("accept-encoding: gzip, deflate\n"), "\(compressed)")
            #expect(!compressed.contains("identity"))
        }
    }

    /// An origin that compresses without being asked (S3 objects stored gzipped): the caller gets the resource's own
    /// bytes, and a head without `Content-Encoding` or the compressed length; streamed with backpressure.
    @Test(arguments: ["gzip", "zlib", "raw"])
    func compressedBodiesAreDecoded(format: String) async throws {
        try await withOrigin { origin, client, group in
            let response = try await client.fetch(origin.url("/coded/\(format)/300000"), maxBytes: 1 << 20)
            let same = Array(response.body.readableBytesView) == TestOrigin.textBytes(300000)  // (a failing #expect would print both)
            #expect(same)
            #expect(response.head.contentLength == nil)
            #expect(response.head.headers["Content-Encoding"].isEmpty)
            #expect(response.head.headers["Content-Length"].isEmpty)
            #expect(response.head.headers.first(name: "Vary") == "Accept-Encoding")  // the rest is kept

            let handler = await streamRecording(client, origin.url("/coded/\(format)/1000000"), group: group, delay: .milliseconds(1))
            #expect(handler.error == nil)
            let streamed = handler.snapshot.body == TestOrigin.textBytes(1_000_000)
            #expect(streamed)
            #expect(handler.snapshot.overlapping == 0, "a decoded piece arrived before the previous one was taken")

            // The caller's limit applies to the decoded size.
            await #expect(throws: OriginError.tooLarge) { try await client.fetch(origin.url("/coded/\(format)/300000"), maxBytes: 200_000) }
        }
    }

    @Test func brokenOrUnknownCodingsAreClearErrors() async throws {
        try await withOrigin { origin, client, _ in
            // Cut short (Content-Length matches what was sent): the gzip end marker is missing.
            await #expect(throws: OriginError.truncated) { try await client.fetch(origin.url("/coded/gzip/300000/cut"), maxBytes: 1 << 20) }
            let brotli = await #expect(throws: OriginError.encoding) {
                try await client.fetch(origin.url("/coded/br/1000"), maxBytes: 1 << 20)
            }
            #expect(brotli?.httpStatus == 502)
            #expect(brotli?.message.contains("Content-Encoding br") == true)
            #expect(origin.hits("/coded/br/1000") == 1, "not retried: asking again gets the same answer")
        }
    }

    /// A CDN that hands out its token as a cookie: kept and sent back, also when set on a redirect; configured
    /// cookies keep their place; with `keepsCookies` off nothing is kept.
    @Test func cookiesAnOriginSetsAreSentBack() async throws {
        try await withOrigin { configuration in
            configuration.originCookies["127.0.0.1"] = [(name: "session", value: "s1")]
        } _: { origin, client, _ in
            await #expect(throws: OriginError.httpStatus) { try await client.fetch(origin.url("/cookie/need"), maxBytes: 1024) }
            _ = try await client.fetch(origin.url("/cookie/set"), maxBytes: 1024)
            let sent = String(buffer: try await client.fetch(origin.url("/cookie/need"), maxBytes: 1024).body)
            #expect(sent == "session=s1; token=abc")
            #expect(client.cookieCount == 1, "the cookie for another domain was refused")
        }
        try await withOrigin { origin, client, _ in
            let response = try await client.fetch(origin.url("/cookie/redirect"), maxBytes: 1024)
            #expect(response.status == 200, "the cookie set on the 302 went with the redirected request")
        }
        try await withOrigin {
            $0.keepsCookies = false
        } _: { origin, client, _ in
            _ = try await client.fetch(origin.url("/cookie/set"), maxBytes: 1024)
            await #expect(throws: OriginError.httpStatus) { try await client.fetch(origin.url("/cookie/need"), maxBytes: 1024) }
            #expect(client.cookieCount == nil)
        }
    }

    /// A request refused with 403 for want of a token cookie gets one from the page the cookie source names (fetched
    /// once however many requests are refused meanwhile) and is asked again, once: the second answer is delivered.
    /// Without a source, or with cookies not kept, the 403 is delivered as it came, after one request.
    @Test func aRefusedRequestGetsItsCookieFromTheSourcesPage() async throws {
        try await withOrigin { origin, client, _ in
            let page = origin.url("/cookie/set")
            let asked = NIOLockedValueBox<[String]>([])
            client.cookies.setPageSource { url in
                asked.withLockedValue { $0.append(url.path) }
                return url.path == "/cookie/need" ? page : nil
            }
            let response = try await client.fetch(origin.url("/cookie/need"), maxBytes: 1024)
            #expect(response.status == 200)
            #expect(String(buffer: response.body) == "token=abc")
            #expect(origin.hits("/cookie/need") == 2 && origin.hits("/cookie/set") == 1)
            #expect(asked.withLockedValue { $0 } == ["/cookie/need"])
        }
        try await withOrigin { origin, client, _ in
            // Refused after a redirect: the page is looked up for the URL asked for, and that URL is asked again.
            let asked = NIOLockedValueBox<[String]>([])
            client.cookies.setPageSource { url in
                asked.withLockedValue { $0.append(url.path) }
                return origin.url("/cookie/set")
            }
            let response = try await client.fetch(origin.url("/cookie/hop"), maxBytes: 1024)
            #expect(response.status == 200)
            #expect(asked.withLockedValue { $0 } == ["/cookie/hop"])
            #expect(origin.hits("/cookie/hop") == 2 && origin.hits("/cookie/need") == 2)
        }
        try await withOrigin { origin, client, _ in
            // A URL the source knows no page for: asked again once, and its 403 delivered.
            client.cookies.setPageSource { _ in nil }
            await #expect(throws: OriginError.httpStatus) { try await client.fetch(origin.url("/cookie/need"), maxBytes: 1024) }
            #expect(origin.hits("/cookie/need") == 2)
        }
        try await withOrigin { configuration in
            // However slowly a loaded machine runs the three requests, they fall within one refresh interval.
            configuration.cookieRefreshInterval = .seconds(3600)
        } _: { origin, client, _ in
            // A page that sets no cookie: several refused requests share one fetch of it, then each gets its 403.
            client.cookies.setPageSource { _ in origin.url("/echo") }
            for _ in 0..<3 {
                await #expect(throws: OriginError.httpStatus) { try await client.fetch(origin.url("/cookie/need"), maxBytes: 1024) }
            }
            #expect(origin.hits("/echo") == 1)
            #expect(origin.hits("/cookie/need") == 6)
        }
        try await withOrigin { origin, client, _ in
            await #expect(throws: OriginError.httpStatus) { try await client.fetch(origin.url("/cookie/need"), maxBytes: 1024) }
            #expect(origin.hits("/cookie/need") == 1, "no source: no second request")
        }
        try await withOrigin {
            $0.keepsCookies = false
        } _: { origin, client, _ in
            client.cookies.setPageSource { _ in origin.url("/cookie/set") }
            await #expect(throws: OriginError.httpStatus) { try await client.fetch(origin.url("/cookie/need"), maxBytes: 1024) }
            #expect(origin.hits("/cookie/need") == 1 && origin.hits("/cookie/set") == 0, "cookies not kept: nothing to refresh")
        }
    }

    /// A 503 that says when to come back: the retry waits that long, up to the policy's longest delay.
    @Test func retryAfterIsObeyedUpToTheLongestDelay() async throws {
        try await withOrigin {
            $0.retry = OriginRetryPolicy(maxRetries: 2, baseDelay: .milliseconds(10), maxDelay: .seconds(1))
        } _: { origin, client, _ in
            let clock = ContinuousClock()
            var started = clock.now
            let first = try await client.fetch(origin.url("/busy/1/1"), maxBytes: 64)
            #expect(first.status == 200)
            #expect(clock.now - started >= .seconds(1), "Retry-After: 1 was not waited out")
            // Asking for 600 s: capped at the policy's 1 s, and the answer still comes (well within half of it).
            started = clock.now
            let second = try await client.fetch(origin.url("/busy/2/600"), maxBytes: 64)
            #expect(second.status == 200)
            #expect(clock.now - started >= .seconds(2))
            #expect(clock.now - started < .seconds(300), "a Retry-After beyond the longest delay is capped")
        }
    }

    @Test func retryAfterIsReadAsSecondsOrADate() throws {
        let url = try OriginURL("http://127.0.0.1/x")
        func head(_ status: Int, _ value: String) -> OriginResponseHead {
            OriginResponseHead(status: status, headers: ["Retry-After": value], url: url)
        }
        #expect(head(429, "3").retryAfter == .seconds(3))
        #expect(head(503, " 120 ").retryAfter == .seconds(120))
        #expect(head(503, "0").retryAfter == nil)
        #expect(head(503, "soon").retryAfter == nil)
        #expect(head(200, "3").retryAfter == nil, "only 429 and 503 ask for a pause")
        // A date 1,000 s ahead: read back as at most that, and at least 900 s (a starved process may take a while
        // between writing the date and reading it).
        let future = HTTPDate.format(Int64(Date().timeIntervalSince1970) + 1000)
        let fromDate = try #require(head(503, future).retryAfter)
        #expect(fromDate > .seconds(900) && fromDate <= .seconds(1000))
        #expect(head(503, "Thu, 01 Jan 1970 00:00:01 GMT").retryAfter == nil)
        let error = OriginError.httpStatus(head(429, "7"))
        #expect(error.originStatus == 429 && error.retryAfter == .seconds(7))
    }

    @Test func rangeRequestsPassThrough() async throws {
        try await withOrigin { origin, client, group in
            let handler = await streamRecording(client, origin.url("/range"), headers: [("Range", "bytes=100-1099")], group: group)
            let head = try #require(handler.snapshot.heads.first)
            #expect(head.status == 206)
            #expect(head.headers.first(name: "Content-Range") == "bytes 100-1099/10000")
            #expect(sameBytes(handler.snapshot.body, TestOrigin.patternBytes(100..<1100)))
            #expect(handler.error == nil)
        }
    }

    @Test func notFoundIsDeliveredToStreamsAndThrownByFetch() async throws {
        try await withOrigin { origin, client, group in
            let handler = await streamRecording(client, origin.url("/notfound"), group: group)
            #expect(handler.snapshot.heads.map(\.status) == [404])
            #expect(handler.error == nil)
            let error = await #expect(throws: OriginError.httpStatus) {
                try await client.fetch(origin.url("/notfound"), maxBytes: 1024)
            }
            #expect(error?.httpStatus == 404)
            #expect(error?.code == "notFound")
            #expect(origin.hits("/notfound") == 2, "a 404 is not retried")
        }
    }

    @Test func serviceUnavailableIsRetriedUntilItSucceeds() async throws {
        try await withOrigin { origin, client, _ in
            let response = try await client.fetch(origin.url("/flaky/2/a"), maxBytes: 1024)
            #expect(response.status == 200)
            #expect(String(buffer: response.body) == "ok")
            #expect(origin.hits("/flaky/2/a") == 3)
        }
    }

    @Test func retriesAreBoundedAndTheLastStatusIsReported() async throws {
        try await withOrigin { origin, client, group in
            let error = await #expect(throws: OriginError.httpStatus) {
                try await client.fetch(origin.url("/flaky/5/b"), maxBytes: 1024)
            }
            #expect(error?.httpStatus == 503)
            #expect(origin.hits("/flaky/5/b") == 3, "one attempt and two retries")
            // A stream sees the final 503 head itself.
            let handler = await streamRecording(client, origin.url("/flaky/9/b"), group: group)
            #expect(handler.snapshot.heads.map(\.status) == [503])
        }
    }

    @Test func noRetriesWhenConfiguredOff() async throws {
        try await withOrigin { configuration in
            configuration.retry = OriginRetryPolicy(maxRetries: 0)
        } _: { origin, client, _ in
            await #expect(throws: OriginError.httpStatus) { try await client.fetch(origin.url("/flaky/1/c"), maxBytes: 1024) }
            #expect(origin.hits("/flaky/1/c") == 1)
        }
    }

    @Test func resetBeforeTheHeadIsRetriedThenReportedAsNetwork() async throws {
        try await withOrigin { origin, client, _ in
            let error = await #expect(throws: OriginError.network) { try await client.fetch(origin.url("/reset"), maxBytes: 1024) }
            #expect(error?.httpStatus == 502)
            #expect(error?.message.contains("errno") == false, "\(String(describing: error))")
            #expect(origin.hits("/reset") == 3)
        }
    }

    @Test func connectionRefusedIsNetwork() async throws {
        // A port bound and never listened on: connections are refused, and no other test's server can take it
        // meanwhile (a closed listener's port was once reused by a parallel test, which answered 404).
        let reserved = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(reserved >= 0)
        defer { close(reserved) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(reserved, $0, length) == 0 && getsockname(reserved, $0, &length) == 0
            }
        }
        try #require(bound)
        let port = Int(UInt16(bigEndian: address.sin_port))
        // With a 600 s connect timeout (× 3 attempts), failing within 300 s proves the refusal was not waited out,
        // with room for a loaded machine.
        try await withOrigin(configure: { $0.connectTimeout = .seconds(600) }) { _, client, _ in
            let clock = ContinuousClock()
            let started = clock.now
            let error = await #expect(throws: OriginError.network) {
                try await client.fetch(try OriginURL("http://127.0.0.1:\(port)/x"), maxBytes: 1024)
            }
            // Said in words a user reads, not NIO's `IOError` dump ("connection reset (error set): …) (errno: 111)").
            #expect(error?.message == "the origin could not be reached: connection refused", "\(String(describing: error))")
            #expect(clock.now - started < .seconds(300), "a refused connection must fail fast, not wait for the connect timeout")
        }
    }

    @Test func truncatedBodyIsReportedAndNeverRetried() async throws {
        try await withOrigin { origin, client, group in
            let handler = await streamRecording(client, origin.url("/truncated"), group: group)
            #expect(handler.snapshot.heads.map(\.status) == [200])
            #expect(sameBytes(handler.snapshot.body, TestOrigin.patternBytes(0..<100)))
            #expect(handler.error == .truncated)
            #expect(handler.snapshot.finishes.count == 1)
            #expect(origin.hits("/truncated") == 1)
            await #expect(throws: OriginError.truncated) { try await client.fetch(origin.url("/truncated"), maxBytes: 4096) }
            #expect(origin.hits("/truncated") == 2)
        }
    }

    @Test func stalledBodyTimesOutAfterTheHeadWithoutRetry() async throws {
        try await withOrigin { configuration in
            configuration.readTimeout = .milliseconds(300)
        } _: { origin, client, group in
            let handler = await streamRecording(client, origin.url("/slow"), group: group)
            #expect(handler.snapshot.heads.count == 1)
            #expect(handler.snapshot.body.count == 10)
            #expect(handler.error == .timeout)
            #expect(handler.error?.httpStatus == 504)
            #expect(origin.hits("/slow") == 1)
        }
    }

    /// The read timeout is the origin's silence while the body is wanted: a stream handler that holds each part back
    /// for longer (backpressure from a full window or a slow client) does not make the download time out.
    @Test func aHandlerHoldingTheBodyBackLongerThanTheReadTimeoutIsNotATimeout() async throws {
        try await withOrigin { configuration in
            configuration.readTimeout = .seconds(1)
        } _: { origin, client, group in
            let handler = await streamRecording(client, origin.url("/bytes/20000"), group: group, delay: .milliseconds(1500))
            #expect(handler.snapshot.finishes.count == 1)
            #expect(handler.error == nil, "\(String(describing: handler.error))")
            #expect(handler.snapshot.body.count == 20_000)
            #expect(handler.snapshot.chunks >= 2, "held back at least once")
        }
    }

    @Test func silentOriginTimesOutBeforeTheHead() async throws {
        try await withOrigin { configuration in
            configuration.readTimeout = .milliseconds(300)
        } _: { origin, client, _ in
            await #expect(throws: OriginError.timeout) { try await client.fetch(origin.url("/silent"), maxBytes: 1024) }
            #expect(origin.hits("/silent") == 1, "read timeouts are not retried")
        }
    }

    @Test func redirectChainsAreFollowed() async throws {
        try await withOrigin { origin, client, _ in
            let response = try await client.fetch(origin.url("/redirect/3"), maxBytes: 1024)
            #expect(String(buffer: response.body) == "done")
            #expect(response.head.url == origin.url("/redirect/0"))
        }
    }

    /// Issue 42: an origin request runs on its event loop from start to head without a Swift task of its own —
    /// redirects and retries included — once its host's addresses are known; a name is resolved in a task once
    /// per `resolutionTTL` (an hour here: on a loaded machine the default 10 s passed between two requests once, and
    /// the name was rightly resolved again).
    @Test func requestsRunOnTheEventLoopWithoutASwiftTaskOnceTheHostIsKnown() async throws {
        try await withOrigin { configuration in
            configuration.resolutionTTL = .seconds(3600)
        } _: { origin, client, _ in
            _ = try await client.fetch(origin.url("/bytes/1000"), maxBytes: 1 << 20)
            _ = try await client.fetch(origin.url("/redirect/3"), maxBytes: 1024)
            let retried = try await client.fetch(origin.url("/flaky/2"), maxBytes: 1024)
            #expect(String(buffer: retried.body) == "ok" && origin.hits("/flaky/2") == 3)
            #expect(client.asyncStepCount == 0, "a numeric host, redirects and retries need no task")
            let named = try OriginURL(origin.url("/bytes/10").string.replacingOccurrences(of: "127.0.0.1", with: "localhost"))
            _ = try await client.fetch(named, maxBytes: 1024)
            #expect(client.asyncStepCount == 1, "a name is resolved in a task")
            _ = try await client.fetch(named, maxBytes: 1024)
            #expect(client.asyncStepCount == 1, "and remembered for the next request")
        }
    }

    @Test func tooManyRedirectsAndLoopsFail() async throws {
        try await withOrigin { configuration in
            configuration.maxRedirects = 2
        } _: { origin, client, _ in
            _ = try await client.fetch(origin.url("/redirect/2"), maxBytes: 1024)
            let error = await #expect(throws: OriginError.tooManyRedirects) {
                try await client.fetch(origin.url("/redirect/3"), maxBytes: 1024)
            }
            #expect(error?.httpStatus == 502)
            await #expect(throws: OriginError.tooManyRedirects) { try await client.fetch(origin.url("/loop"), maxBytes: 1024) }
            #expect(origin.hits("/loop") == 1, "the loop is detected at the first repeat")
        }
    }

    @Test func redirectToTheMetadataServiceIsRefused() async throws {
        try await withOrigin { origin, client, _ in
            let error = await #expect(throws: OriginError.forbiddenDestination) {
                try await client.fetch(origin.url("/metadata"), maxBytes: 1024)
            }
            #expect(error?.httpStatus == 403)
            #expect(origin.hits("/metadata") == 1)
        }
    }

    @Test func fetchRefusesBodiesOverTheLimit() async throws {
        try await withOrigin { origin, client, _ in
            let announced = await #expect(throws: OriginError.tooLarge) {
                try await client.fetch(origin.url("/bytes/50000"), maxBytes: 1000)
            }
            #expect(announced?.httpStatus == 502)
            await #expect(throws: OriginError.tooLarge) { try await client.fetch(origin.url("/chunked/50000"), maxBytes: 1000) }
            let exact = try await client.fetch(origin.url("/chunked/1000"), maxBytes: 1000)
            #expect(exact.body.readableBytes == 1000)
        }
    }

    @Test func cancelAfterTheHeadFinishesOnceWithCancelled() async throws {
        try await withOrigin { origin, client, group in
            let eventLoop = group.next()
            let box = TaskBox()
            let handler = RecordingHandler(eventLoop: eventLoop) { _ in box.task?.cancel() }
            // Started on the handler's event loop: the head (delivered there) cannot come before `box` holds the task.
            let task = try await eventLoop.submit {
                let task = client.stream(origin.url("/slow"), on: eventLoop, handler: handler)
                box.task = task
                return task
            }.get()
            await #expect(throws: OriginError.cancelled) { try await task.futureResult.get() }
            task.cancel()
            try await Task.sleep(for: .milliseconds(100))
            let record = handler.snapshot
            #expect(record.heads.count == 1)
            #expect(record.finishes.count == 1)
            #expect(record.callsAfterFinish == 0)
            #expect(handler.error == .cancelled)
        }
    }

    /// Handlers keep their task to cancel it (the proxy's shared fetches do). A finished task lets go of its handler,
    /// so the pair — and every body chunk the handler holds — is freed. Before, every cache miss of `serve` leaked
    /// its whole body (the soak's memory growth).
    @Test func aFinishedTaskReleasesAHandlerThatHoldsIt() async throws {
        try await withOrigin { origin, client, group in
            weak var released: HoldingHandler?
            do {
                let eventLoop = group.next()
                let handler = HoldingHandler(eventLoop: eventLoop)
                released = handler
                let task = client.stream(origin.url("/chunked/50000"), on: eventLoop, handler: handler)
                handler.task.withLockedValue { $0 = task }
                try await task.futureResult.get()
                #expect(handler.received.withLockedValue { $0 } == 50000)
            }
            // AsyncHTTPClient may drop its own references a moment after the last callback (a bound, not a measurement).
            try await waitUntil("the handler to be freed (a handler and its task that keep each other alive never are)") {
                released == nil
            }
        }
    }

    @Test func cancelDuringRetryBackoffStopsRetrying() async throws {
        try await withOrigin { configuration in
            configuration.retry = OriginRetryPolicy(maxRetries: 5, baseDelay: .seconds(600), maxDelay: .seconds(600))
        } _: { origin, client, group in
            let eventLoop = group.next()
            let handler = RecordingHandler(eventLoop: eventLoop)
            let task = client.stream(origin.url("/flaky/9/d"), on: eventLoop, handler: handler)
            // Wait for the first attempt (by state, not a fixed delay: CI machines are slow), then cancel
            // during the backoff (5–10 min with jitter: a starved test process cannot sleep through it).
            try await waitUntil("the first attempt") { origin.hits("/flaky/9/d") > 0 }
            task.cancel()
            await #expect(throws: OriginError.cancelled) { try await task.futureResult.get() }
            try await Task.sleep(for: .milliseconds(100))
            #expect(origin.hits("/flaky/9/d") == 1)
            #expect(handler.snapshot.heads.isEmpty)
            #expect(handler.snapshot.finishes.count == 1)
        }
    }

    @Test func cancellingTheFetchingSwiftTaskCancelsTheRequest() async throws {
        try await withOrigin { origin, client, _ in
            let fetching = Task { try await client.fetch(origin.url("/silent"), maxBytes: 1024) }
            try await Task.sleep(for: .milliseconds(200))
            fetching.cancel()
            await #expect(throws: OriginError.cancelled) { try await fetching.value }
        }
    }
}

/// Lets a handler closure reach the task it belongs to.
final class TaskBox: Sendable {
    private let box = NIOLockedValueBox<OriginTask?>(nil)
    var task: OriginTask? {
        get { box.withLockedValue { $0 } }
        set { box.withLockedValue { $0 = newValue } }
    }
}

/// Keeps its own task, as the proxy's shared fetches do, and the body's bytes.
private final class HoldingHandler: OriginStreamHandler, Sendable {
    let task = NIOLockedValueBox<OriginTask?>(nil)
    let received = NIOLockedValueBox(0)
    private let chunks = NIOLockedValueBox<[ByteBuffer]>([])
    private let eventLoop: any EventLoop

    init(eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func didReceiveHead(_ head: OriginResponseHead) {}

    func didReceiveBody(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        received.withLockedValue { $0 += buffer.readableBytes }
        chunks.withLockedValue { $0.append(buffer) }
        return eventLoop.makeSucceededVoidFuture()
    }

    func didFinish(_ result: Result<Void, OriginError>) {}
}
