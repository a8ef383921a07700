import HLSTestSupport
import NIOCore
import NIOHTTP1
import Testing

@testable import HLSProxy

/// The connection state machine, driven without a channel.
@Suite struct ProxyConnectionStateMachineTests {
    /// A GET head; with a `Host` unless the headers have one or `host` is false.
    func head(_ uri: String = "/x", version: HTTPVersion = .http1_1, headers: HTTPHeaders = [:], host: Bool = true) -> HTTPRequestHead {
        var headers = headers
        if host && !headers.contains(name: "host") { headers.add(name: "Host", value: "x") }
        return HTTPRequestHead(version: version, method: .GET, uri: uri, headers: headers)
    }

    /// RFC 9112 §3.2: 400 for an HTTP/1.1 request without `Host`, and for any request with two or an invalid one.
    @Test func hostIsRequiredOnceAndValid() {
        for (head, accepted) in [
            (head(), true), (head(headers: ["Host": "127.0.0.1:8080"]), true), (head(headers: ["Host": "[::1]:8080"]), true),
            (head(headers: ["Host": ""]), true), (head(version: .http1_0, host: false), true),
            (head(host: false), false), (head(headers: HTTPHeaders([("Host", "a"), ("host", "a")])), false),
            (head(version: .http1_0, headers: HTTPHeaders([("Host", "a"), ("Host", "b")])), false), (head(headers: ["Host": "a b"]), false),
            (head(headers: ["Host": "a/b"]), false),
        ] {
            var machine = ProxyConnectionStateMachine()
            let action = machine.receivedHead(head)
            if accepted {
                #expect(action == .none, "\(head.headers)")
            } else {
                guard case .reject(let error) = action else {
                    Issue.record("\(head.headers) accepted")
                    continue
                }
                #expect(error == .badRequest)
                #expect(machine.responseCompleted(success: true) == .close)
            }
        }
    }

    @Test func keepAliveRequestCycle() {
        var machine = ProxyConnectionStateMachine()
        #expect(machine.isIdle)
        #expect(machine.receivedHead(head()) == .none)
        #expect(machine.receivedEnd() == .dispatch(head(), keepAlive: true))
        #expect(machine.responseKeepsAlive)
        #expect(machine.responseCompleted(success: true) == .awaitNextRequest)
        #expect(machine.isIdle)
    }

    @Test func connectionCloseAndHTTP10CloseAfterTheResponse() {
        var machine = ProxyConnectionStateMachine()
        _ = machine.receivedHead(head(headers: ["Connection": "close"]))
        #expect(machine.receivedEnd() == .dispatch(head(headers: ["Connection": "close"]), keepAlive: false))
        #expect(!machine.responseKeepsAlive)
        #expect(machine.responseCompleted(success: true) == .close)

        var old = ProxyConnectionStateMachine()
        _ = old.receivedHead(head(version: .http1_0))
        #expect(old.receivedEnd() == .dispatch(head(version: .http1_0), keepAlive: false))
    }

    @Test func aDecoderErrorIsRefusedOrEndsTheConnectionAfterTheResponse() {
        let refusal = ProxyError.badRequest("malformed")
        var idle = ProxyConnectionStateMachine()
        #expect(idle.parseFailed(refusal) == .reject(refusal))
        #expect(idle.isResponding)
        #expect(idle.parseFailed(refusal) == .none, "refused once")
        #expect(idle.responseCompleted(success: true) == .close)

        var midRequest = ProxyConnectionStateMachine()
        _ = midRequest.receivedHead(head())
        #expect(midRequest.parseFailed(refusal) == .reject(refusal))

        var responding = ProxyConnectionStateMachine()
        _ = responding.receivedHead(head())
        _ = responding.receivedEnd()
        #expect(responding.parseFailed(refusal) == .none, "the response under way is finished first")
        #expect(!responding.responseKeepsAlive)
        #expect(responding.responseCompleted(success: true) == .close)
    }

    @Test func aBodyThatEndsWithTheConnectionClosesIt() {
        var machine = ProxyConnectionStateMachine()
        _ = machine.receivedHead(head())
        _ = machine.receivedEnd()
        #expect(machine.responseKeepsAlive)
        machine.closeAfterResponse()
        #expect(!machine.responseKeepsAlive)
        #expect(machine.responseCompleted(success: true) == .close)
    }

    @Test func failedWriteCloses() {
        var machine = ProxyConnectionStateMachine()
        _ = machine.receivedHead(head())
        _ = machine.receivedEnd()
        #expect(machine.responseCompleted(success: false) == .close)
    }

    @Test func tooManyHeadersAreRejectedAndTheRestIgnored() {
        var machine = ProxyConnectionStateMachine(maxHeaderCount: 2)
        let crowded = head(headers: ["a": "1", "b": "2", "c": "3"])
        guard case .reject(let error) = machine.receivedHead(crowded) else {
            Issue.record("expected a rejection")
            return
        }
        #expect(error == .headersTooLarge)
        #expect(machine.receivedBody(ByteBuffer(repeating: 0, count: 10)) == .none)
        #expect(machine.receivedEnd() == .none)
        #expect(machine.responseCompleted(success: true) == .close)
    }

    @Test func smugglingShapesAreRejected() {
        var both = ProxyConnectionStateMachine()
        guard case .reject(let error) = both.receivedHead(head(headers: ["Content-Length": "4", "Transfer-Encoding": "chunked"])) else {
            Issue.record("CL+TE must be rejected")
            return
        }
        #expect(error == .badRequest)
        var twoLengths = ProxyConnectionStateMachine()
        guard case .reject = twoLengths.receivedHead(head(headers: ["Content-Length": "4", "content-length": "5"])) else {
            Issue.record("conflicting Content-Length must be rejected")
            return
        }
    }

    @Test func oversizedBodyIsRejected() {
        var machine = ProxyConnectionStateMachine(maxRequestBodyBytes: 10)
        _ = machine.receivedHead(head())
        #expect(machine.receivedBody(ByteBuffer(repeating: 0, count: 8)) == .none)
        guard case .reject = machine.receivedBody(ByteBuffer(repeating: 0, count: 8)) else {
            Issue.record("body over the limit must be rejected")
            return
        }
    }

    /// The request's body and the bytes of its head (when the decoder found them whole) are the machine's until the
    /// request is dispatched with them; the next request starts with neither, and heads are numbered across both.
    @Test func aRequestsBodyAndHeadBytesTravelWithItsDispatch() {
        var machine = ProxyConnectionStateMachine()
        let bytes = RequestDecoder.Candidate(head: Array("GET /x HTTP/1.1\r\nHost: x\r\n\r\n".utf8), hash: 7, headNumber: 1)
        let post = head(headers: ["Content-Length": "6"])
        #expect(machine.receivedHead(post, candidate: bytes) == .none)
        #expect(machine.headsReceived == 1)
        #expect(machine.receivedBody(ByteBuffer(string: "abc")) == .none)
        #expect(machine.receivedBody(ByteBuffer(string: "def")) == .none)
        #expect(machine.receivedEnd() == .dispatch(post, keepAlive: true, body: ByteBuffer(string: "abcdef"), candidate: bytes))
        #expect(machine.responseCompleted(success: true) == .awaitNextRequest)
        #expect(machine.receivedHead(head()) == .none)
        #expect(machine.headsReceived == 2)
        #expect(machine.receivedEnd() == .dispatch(head(), keepAlive: true, body: nil, candidate: nil))
    }

    @Test func eventsAfterCloseDoNothing() {
        var machine = ProxyConnectionStateMachine()
        machine.channelClosed()
        #expect(machine.receivedHead(head()) == .none)
        #expect(machine.responseCompleted(success: true) == .none)
    }

    // MARK: - Pipelining, reads, refusals, draining, framing

    @Test func pipelinedRequestsWaitForTheResponseBeforeThemAndReadsAreHeldMeanwhile() {
        var machine = ProxyConnectionStateMachine()
        for part: HTTPServerRequestPart in [.head(head("/a")), .end(nil), .head(head("/b")), .end(nil)] { machine.enqueue(part) }
        let readNow = machine.readRequested()
        #expect(!readNow, "parts wait: the socket is not read")
        #expect(machine.nextPart() == .head(head("/a")))
        #expect(machine.receivedHead(head("/a")) == .none)
        #expect(machine.nextPart() == .end(nil))
        #expect(machine.receivedEnd() == .dispatch(head("/a"), keepAlive: true))
        #expect(machine.nextPart() == nil, "nothing is handed on while /a is answered")
        #expect(machine.queueSettled() == .none)
        #expect(machine.responseCompleted(success: true) == .awaitNextRequest)
        #expect(machine.nextPart() == .head(head("/b")))
        _ = machine.receivedHead(head("/b"))
        #expect(machine.nextPart() == .end(nil))
        #expect(machine.receivedEnd() == .dispatch(head("/b"), keepAlive: true))
        _ = machine.responseCompleted(success: true)
        #expect(machine.queueSettled() == .read, "the held read is issued once the queue is empty")
        let readLater = machine.readRequested()
        #expect(readLater)
    }

    @Test func aDecoderRefusalIsAnsweredAfterTheRequestsDecodedBeforeIt() {
        var machine = ProxyConnectionStateMachine()
        machine.enqueue(.head(head("/a")))
        machine.enqueue(.end(nil))
        let refusal = ProxyError.badRequest("malformed")
        let first = machine.decoderRefused(refusal)
        let again = machine.decoderRefused(refusal)
        #expect(first)
        #expect(!again, "the same bytes reported again are ignored")
        _ = machine.nextPart()
        _ = machine.receivedHead(head("/a"))
        _ = machine.nextPart()
        #expect(machine.receivedEnd() == .dispatch(head("/a"), keepAlive: true))
        #expect(machine.queueSettled() == .none, "not while /a is answered")
        #expect(machine.responseCompleted(success: true) == .awaitNextRequest)
        #expect(machine.queueSettled() == .refuse(.reject(refusal)))
        #expect(machine.responseCompleted(success: true) == .close)
    }

    @Test func aRequestCutShortByTheConnectionIsRejectedUnderItsOwnHead() {
        var machine = ProxyConnectionStateMachine(maxRequestBodyBytes: 4)
        _ = machine.receivedHead(head("/upload", headers: ["Content-Length": "4"]))
        guard case .reject = machine.receivedBody(ByteBuffer(repeating: 0, count: 8)) else {
            Issue.record("expected a rejection")
            return
        }
        let taken = machine.takeRejectedHead()
        let takenAgain = machine.takeRejectedHead()
        #expect(taken?.uri == "/upload")
        #expect(takenAgain == nil, "taken once")
    }

    @Test func drainingClosesAnIdleConnectionAndEndsABusyOneAfterItsResponse() {
        var idle = ProxyConnectionStateMachine()
        _ = idle.receivedHead(head())
        _ = idle.receivedEnd()
        #expect(idle.responseCompleted(success: true) == .awaitNextRequest, "kept alive")
        #expect(idle.drain() == .close)
        #expect(!idle.awaitsFirstRequest)

        // Accepted, nothing asked yet: its first request may be on its way; answered, then closed.
        var fresh = ProxyConnectionStateMachine()
        #expect(fresh.drain() == .none)
        #expect(fresh.awaitsFirstRequest)
        _ = fresh.receivedHead(head())
        #expect(!fresh.awaitsFirstRequest)
        #expect(fresh.receivedEnd() == .dispatch(head(), keepAlive: false))
        #expect(fresh.responseCompleted(success: true) == .close)

        var busy = ProxyConnectionStateMachine()
        _ = busy.receivedHead(head())
        _ = busy.receivedEnd()
        #expect(busy.connectionHeader == nil)
        #expect(busy.drain() == .none)
        #expect(busy.connectionHeader == "close", "the response under way says the connection ends")
        #expect(busy.responseCompleted(success: true) == .close)

        var queued = ProxyConnectionStateMachine()
        queued.enqueue(.head(head()))
        #expect(queued.drain() == .none, "a queued request is answered first")
        _ = queued.nextPart()
        _ = queued.receivedHead(head())
        #expect(queued.receivedEnd() == .dispatch(head(), keepAlive: false))
        #expect(queued.responseCompleted(success: true) == .close)
    }

    @Test func http10ResponsesAreFramedForHTTP10() {
        var machine = ProxyConnectionStateMachine()
        let old = head(version: .http1_0, headers: ["Connection": "keep-alive"])
        _ = machine.receivedHead(old)
        #expect(machine.receivedEnd() == .dispatch(old, keepAlive: true))
        #expect(!machine.chunkedAllowed)
        #expect(machine.connectionHeader == "keep-alive", "an HTTP/1.0 client is told the connection stays")
        machine.streamStarting(hasBody: true, hasLength: false)
        #expect(machine.connectionHeader == "close", "a body of unknown length ends with the connection")
        machine.streamStarted(framing: .untilClose)
        #expect(machine.streamFraming == .untilClose)
        machine.streamEnded()
        #expect(machine.responseCompleted(success: true) == .close)

        var current = ProxyConnectionStateMachine()
        _ = current.receivedHead(head())
        _ = current.receivedEnd()
        #expect(current.chunkedAllowed)
        current.streamStarting(hasBody: true, hasLength: false)
        #expect(current.connectionHeader == nil, "HTTP/1.1 chunks it and keeps the connection")
        #expect(current.responseCompleted(success: true) == .awaitNextRequest)
    }
}
