import NIOCore

/// What ``ProxyHTTPHandler`` tells the connection's timeouts: where the exchange is, and how many response bytes it
/// handed to the channel. The handler knows the timeouts only through this.
protocol ConnectionTimeoutEvents: AnyObject {
    /// The request head is complete; `awaitingBody`: its body is still to be read.
    func requestHeadReceived(awaitingBody: Bool)
    /// The request is complete (its body is in): it is being answered.
    func requestReceived()
    /// The response is written: the connection is idle.
    func responseCompleted()
    /// `bytes` more response bytes were handed to the channel.
    func queued(bytes: Int)
}

/// The connection timeouts' decisions, a value type that is told the connection's events and asked at each check
/// whether the connection is overdue. It never reads a clock or the channel itself — times come in as arguments and
/// the channel's buffered bytes through a closure — so every rule is unit-tested with an injected clock
/// (`ConnectionTimeoutsTests`); ``ConnectionTimeoutHandler`` schedules the checks and closes what it says.
///
/// - Once the first byte of a request head arrives, the whole head must follow within `head` (slowloris).
/// - While a request body is expected, no more than `body` may pass without a byte of it; the clock starts at the
///   first check after the head, so a head and body that arrive together cost nothing.
/// - While response bytes wait to be sent, the client must take some within `send` (a client that stops reading;
///   nginx's `send_timeout`). Progress is what the kernel accepted — the bytes handed to the channel minus those it
///   still buffers — so a large `sendfile` that a slow client reads steadily is never cut off.
/// - A connection with no request in progress is closed after `idle`.
struct ConnectionTimeouts {
    struct Limits: Sendable {
        var head: TimeAmount
        var body: TimeAmount
        var send: TimeAmount
        var idle: TimeAmount
    }

    /// Why a connection is closed.
    enum Expired: Equatable, Sendable {
        case head
        case body
        case send
        case idle
    }

    private enum State {
        case idle(since: NIODeadline)
        case readingHead(since: NIODeadline)
        /// The head is in, the rest of the request is not; `since` is the last byte (nil: none yet, the next check
        /// starts the clock).
        case readingBody(since: NIODeadline?)
        case inRequest
    }

    let limits: Limits
    private var state: State
    /// Response bytes handed to the channel so far.
    private var queuedBytes: Int64 = 0
    /// Response bytes the kernel had taken at the last check that saw any waiting.
    private var sentBytes: Int64 = 0
    /// Since when bytes have waited without any being sent (nil: none waiting at the last check).
    private var stalledSince: NIODeadline?

    init(limits: Limits, now: NIODeadline) {
        self.limits = limits
        self.state = .idle(since: now)
    }

    /// How often to check: a quarter of the shortest timeout, at least 1 ms.
    var checkInterval: TimeAmount {
        let shortest = [limits.head, limits.body, limits.send, limits.idle].map(\.nanoseconds).min()!
        return .nanoseconds(max(shortest / 4, 1_000_000))
    }

    /// The timeout that runs now (nil: a request is being answered). Tests wait for a phase before moving their clock.
    var phase: Expired? {
        switch state {
        case .idle: .idle
        case .readingHead: .head
        case .readingBody: .body
        case .inRequest: nil
        }
    }

    /// The connection is open (again): idle from `now`.
    mutating func connected(at now: NIODeadline) {
        state = .idle(since: now)
    }

    /// Request bytes arrived. `now` is read only when the time matters (the first byte of a head, a body's bytes):
    /// not for every read of a request being answered.
    mutating func bytesRead(at now: @autoclosure () -> NIODeadline) {
        switch state {
        case .idle: state = .readingHead(since: now())
        case .readingBody: state = .readingBody(since: now())
        case .readingHead, .inRequest: break
        }
    }

    /// The request head is complete: no head timeout until the response is written; the body timeout while the rest
    /// of the request (`awaitingBody`: it was accepted and has not ended) is read.
    mutating func requestHeadReceived(awaitingBody: Bool) {
        state = awaitingBody ? .readingBody(since: nil) : .inRequest
    }

    mutating func requestReceived() {
        state = .inRequest
    }

    mutating func responseCompleted(at now: NIODeadline) {
        state = .idle(since: now)
    }

    mutating func queued(bytes: Int) {
        queuedBytes &+= Int64(bytes)
    }

    /// The connection closed: nothing expires any more.
    mutating func closed() {
        state = .inRequest
        queuedBytes = 0
        sentBytes = 0
        stalledSince = nil
    }

    /// Whether a timeout expired at `now`. `bufferedBytes` (the response bytes the channel still holds) is asked only
    /// when response bytes may be waiting.
    mutating func check(at now: NIODeadline, bufferedBytes: () -> Int) -> Expired? {
        switch state {
        case .readingHead(let since) where now - since >= limits.head: return .head
        case .idle(let since) where now - since >= limits.idle: return .idle
        case .readingBody(let since?) where now - since >= limits.body: return .body
        case .readingBody(nil): state = .readingBody(since: now)
        default: break
        }
        // Nothing handed over since the last check found everything sent: nothing can be waiting.
        guard queuedBytes != sentBytes || stalledSince != nil else { return nil }
        let buffered = bufferedBytes()
        let sent = queuedBytes - Int64(buffered)
        if buffered == 0 {
            stalledSince = nil
        } else if stalledSince == nil || sent > sentBytes {
            stalledSince = now
        } else if let stalledSince, now - stalledSince >= limits.send {
            return .send
        }
        sentBytes = sent
        return nil
    }
}
