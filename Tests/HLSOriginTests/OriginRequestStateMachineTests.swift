import HLSCacheCore
import NIOCore
import Testing

@testable import HLSOrigin

/// The steps of one origin request without a network: redirects (303 → GET, the limit, loops), retries (per hop, of
/// statuses and of failures before the head), the one cookie refresh of a 401/403.
@Suite struct OriginRequestStateMachineTests {
    static func url(_ text: String) -> OriginURL { try! OriginURL(text) }
    static let address = OriginIPAddress("127.0.0.1")!

    static func machine(_ text: String = "http://o.test/a.m3u8", method: OriginMethod = .GET, cookies: Bool = true)
        -> OriginRequestStateMachine
    {
        OriginRequestStateMachine(url: url(text), method: method, mayRefreshCookies: cookies, maxRedirects: 2, maxRetries: 2)
    }

    /// The URL of a `.checkDestination`, else nil (after a `.redirected`, its next action's).
    static func checked(_ action: OriginRequestStateMachine.Action) -> String? {
        switch action {
        case .checkDestination(let url): return url.string
        case .redirected(_, _, _, let then): return checked(then)
        default: return nil
        }
    }

    static func failure(_ action: OriginRequestStateMachine.Action) -> OriginError? {
        if case .fail(let error) = action { return error }
        return nil
    }

    @Test func aPlainRequestChecksItsDestinationThenMakesOneAttemptAndStopsAtTheHead() {
        var machine = Self.machine()
        #expect(Self.checked(machine.start()) == "http://o.test/a.m3u8")
        guard
            case .attempt(let url, let method, let addresses, let retryStatuses, let retryAuthorization) = machine.destinationChecked([
                Self.address
            ])
        else {
            Issue.record("no attempt after the destination check")
            return
        }
        #expect(url.string == "http://o.test/a.m3u8" && method == .GET && addresses == [Self.address])
        #expect(retryStatuses && retryAuthorization)
        guard case .none = machine.attemptEnded(.delivered) else {
            Issue.record("a delivered head is the end of the machine's work")
            return
        }
    }

    @Test func redirectsAreFollowedUpToTheLimitAndA303TurnsIntoAGet() {
        var machine = Self.machine(method: .HEAD)
        _ = machine.start()
        _ = machine.destinationChecked([Self.address])
        let first = machine.attemptEnded(.redirect(Self.url("http://cdn.test/1"), status: 303))
        #expect(Self.checked(first) == "http://cdn.test/1")
        #expect(machine.method == .HEAD, "a HEAD stays a HEAD after a 303")
        _ = machine.destinationChecked([Self.address])
        #expect(Self.checked(machine.attemptEnded(.redirect(Self.url("http://cdn.test/2"), status: 302))) == "http://cdn.test/2")
        _ = machine.destinationChecked([Self.address])
        let third = machine.attemptEnded(.redirect(Self.url("http://cdn.test/3"), status: 302))
        #expect(Self.failure(third) == .tooManyRedirects, "the third redirect is past maxRedirects 2")

        var get = Self.machine()
        _ = get.start()
        _ = get.destinationChecked([Self.address])
        _ = get.attemptEnded(.redirect(Self.url("http://cdn.test/1"), status: 303))
        #expect(get.method == .GET && get.redirects == 1)
    }

    @Test func aRedirectBackToAURLAlreadyVisitedIsALoop() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.destinationChecked([Self.address])
        _ = machine.attemptEnded(.redirect(Self.url("http://cdn.test/x"), status: 302))
        _ = machine.destinationChecked([Self.address])
        let back = machine.attemptEnded(.redirect(Self.url("http://o.test/a.m3u8"), status: 302))
        #expect(Self.failure(back) == .tooManyRedirects)
        #expect(Self.failure(back)?.detail.contains("redirect loop") == true)
    }

    @Test func retriesBackOffPerHopAndStopAtTheLimit() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.destinationChecked([Self.address])
        guard case .backoff(1, let retryAfter, _) = machine.attemptEnded(.retryStatus(503, retryAfter: .seconds(3))) else {
            Issue.record("a 503 is retried after a backoff")
            return
        }
        #expect(retryAfter == .seconds(3))
        #expect(Self.checked(machine.backoffEnded()) == "http://o.test/a.m3u8")
        guard case .attempt(_, _, _, true, _) = machine.destinationChecked([Self.address]) else {
            Issue.record("one retry left: statuses may still be swallowed")
            return
        }
        guard case .backoff(2, nil, _) = machine.attemptEnded(.failedBeforeHead(ChannelError.connectTimeout(.seconds(1)))) else {
            Issue.record("a connection failure before the head is retried too")
            return
        }
        _ = machine.backoffEnded()
        guard case .attempt(_, _, _, false, _) = machine.destinationChecked([Self.address]) else {
            Issue.record("no retry left: the last answer is delivered whatever it is")
            return
        }
        #expect(Self.failure(machine.attemptEnded(.failedBeforeHead(ChannelError.connectTimeout(.seconds(1))))) != nil)
        // A redirect starts the hop's count again.
        var redirected = Self.machine()
        _ = redirected.start()
        _ = redirected.destinationChecked([Self.address])
        _ = redirected.attemptEnded(.retryStatus(502, retryAfter: nil))
        #expect(redirected.retries == 1)
        _ = redirected.backoffEnded()
        _ = redirected.destinationChecked([Self.address])
        _ = redirected.attemptEnded(.redirect(Self.url("http://cdn.test/b"), status: 302))
        #expect(redirected.retries == 0)
    }

    @Test func aFailureThatCannotBeRetriedEndsTheRequestAtOnce() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.destinationChecked([Self.address])
        #expect(Self.failure(machine.attemptEnded(.failedBeforeHead(OriginError.tooLarge))) == .tooLarge)
        var refused = Self.machine()
        _ = refused.start()
        #expect(Self.failure(refused.destinationRefused(OriginError.forbiddenDestination)) == .forbiddenDestination)
        var unstarted = Self.machine()
        _ = unstarted.start()
        _ = unstarted.destinationChecked([Self.address])
        #expect(Self.failure(unstarted.attemptFailed(OriginError.busy)) == .busy)
    }

    @Test func aRefusalLeadsToOneCookieRefreshAndTheURLAskedForAgainFromTheStart() {
        var machine = Self.machine()
        _ = machine.start()
        _ = machine.destinationChecked([Self.address])
        _ = machine.attemptEnded(.redirect(Self.url("http://edge.test/signed"), status: 302))
        _ = machine.destinationChecked([Self.address])
        guard case .refreshCookies(let requested, let refused, 403) = machine.attemptEnded(.authorizationRefused(403)) else {
            Issue.record("a 403 asks for a cookie refresh")
            return
        }
        #expect(requested.string == "http://o.test/a.m3u8" && refused.string == "http://edge.test/signed")
        #expect(Self.checked(machine.cookiesRefreshed()) == "http://o.test/a.m3u8", "the URL asked for, not the redirect's target")
        #expect(machine.redirects == 0)
        guard case .attempt(_, _, _, _, false) = machine.destinationChecked([Self.address]) else {
            Issue.record("after one refresh a 401/403 is delivered as it is")
            return
        }
        var without = Self.machine(cookies: false)
        _ = without.start()
        guard case .attempt(_, _, _, _, false) = without.destinationChecked([Self.address]) else {
            Issue.record("without cookies kept a refusal is never swallowed")
            return
        }
    }
}
