import AsyncHTTPClient
import HLSCacheCore
import HLSPlaylist
import NIOCore
import NIOHTTP1

/// What one attempt (one HTTP exchange) came to, as far as the request driver is concerned.
enum OriginAttemptOutcome: Sendable {
    /// The head went to the stream handler; from here the delegate finishes the task itself.
    case delivered
    /// A redirect to follow; its body was discarded.
    case redirect(OriginURL, status: Int)
    /// A 502/503/504 to retry, and how long the origin asked to wait (`Retry-After`); its body was discarded.
    case retryStatus(Int, retryAfter: Duration?)
    /// A 401/403 to ask again after fetching fresh cookies (``OriginClient/cookies``); body discarded.
    case authorizationRefused(Int)
    /// The exchange failed before any head arrived.
    case failedBeforeHead(any Error)
}

/// What one attempt receives, from AsyncHTTPClient (as its delegate) or from a raw exchange
/// (``OriginRawExchange``). It decides at the head whether the response is the one to deliver (then it forwards head
/// and body to the task, keeping the transport's backpressure) or one to swallow (redirect, retryable status). Both
/// transports call it on the task's event loop only (AHC with `.delegate(on:)`), and all its mutable state is
/// touched there, hence the unchecked Sendable (an AHC delegate is a class AHC calls directly: its state cannot sit
/// behind a loop-bound box without a check on every body part; AHC documents the delegate's calls as serial, on the
/// event loop given to `execute(request:delegate:eventLoop:)`). A transport calls ``sent(abort:)`` once the request is on its way,
/// then ``received(head:)``, ``received(part:)`` (the next only after the last one's future completed), and
/// ``finished()`` or ``failed(_:)``.
final class OriginAttemptDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = Void

    private enum State {
        case waitingForHead
        case delivering(received: Int, expected: Int?)
        case discarding(OriginAttemptOutcome)
        case done
    }

    private var state = State.waitingForHead
    /// Set when the delivered response is compressed (`Content-Encoding: gzip`, `deflate`).
    private var decoder: ContentDecoder?
    private let url: OriginURL
    private let method: OriginMethod
    private let retryStatuses: Bool
    private let retryAuthorization: Bool
    private let task: OriginTask
    private let outcome: EventLoopPromise<OriginAttemptOutcome>

    /// Where the cookies of every answer go (redirects and retried ones included).
    private let storeCookies: (@Sendable ([String], OriginURL) -> Void)?

    /// The longest silence of the origin while the next part is wanted (``OriginConfiguration/readTimeout``).
    /// AsyncHTTPClient's own read timeout also runs while the stream handler holds a part back (backpressure: a full
    /// memory window, a slow client), so a download its consumer paused for longer than the timeout failed as if the
    /// origin had gone silent; this one runs only while this side is reading.
    private let readTimeout: TimeAmount?
    private var watchdog: Scheduled<Void>?
    /// Ends the exchange with an error (the transport then calls ``failed(_:)``).
    private var abort: (@Sendable (any Error) -> Void)?

    /// - Parameters:
    ///   - retryStatuses: whether a 502/503/504 may be swallowed for a retry (retries are left).
    ///   - retryAuthorization: whether a 401/403 may be swallowed to ask again with fresh cookies.
    init(
        url: OriginURL, method: OriginMethod, retryStatuses: Bool, retryAuthorization: Bool, task: OriginTask, storeCookies: (@Sendable ([String], OriginURL) -> Void)?,
        readTimeout: TimeAmount?
    ) {
        self.readTimeout = readTimeout
        self.url = url
        self.retryAuthorization = retryAuthorization
        self.storeCookies = storeCookies
        self.method = method
        self.retryStatuses = retryStatuses
        self.task = task
        self.outcome = task.eventLoop.makePromise()
    }

    var futureOutcome: EventLoopFuture<OriginAttemptOutcome> { outcome.futureResult }

    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]
    static let retryableStatuses: Set<Int> = [502, 503, 504]

    func didSendRequest(task: HTTPClient.Task<Void>) {
        sent(abort: { task.fail(reason: $0) })
    }

    func sent(abort: @escaping @Sendable (any Error) -> Void) {
        self.abort = abort
        if case .done = state { return }
        armWatchdog()
    }

    /// (Re)starts the wait for the origin's next bytes.
    private func armWatchdog() {
        watchdog?.cancel()
        guard let readTimeout, let abort else { return }
        watchdog = task.eventLoop.scheduleTask(in: readTimeout) {
            abort(HTTPClientError.readTimeout)
        }
    }

    private func disarmWatchdog() {
        watchdog?.cancel()
        watchdog = nil
    }

    func didReceiveHead(task _: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        received(head: head)
    }

    func received(head: HTTPResponseHead) -> EventLoopFuture<Void> {
        armWatchdog()
        let status = Int(head.status.code)
        let answered = OriginResponseHead(status: status, headers: head.headers, url: url)
        // Every answer may set cookies, a redirect's too (a signed-cookie CDN sets them on the way).
        let setCookie = head.headers["Set-Cookie"]
        if let storeCookies, !setCookie.isEmpty { storeCookies(setCookie, url) }
        if Self.redirectStatuses.contains(status), let location = head.headers.first(name: "Location") {
            do {
                let target = try OriginURL(URIResolver(baseURL: url.string).resolve(location))
                state = .discarding(.redirect(target, status: status))
            } catch {
                // Not an http(s) URL, or one carrying credentials: the redirect cannot be followed, and its own answer
                // (a 3xx without the content) is no answer to give a player.
                state = .discarding(
                    .failedBeforeHead(
                        OriginError.httpStatus(status).with("\(url.host) redirected to a URL that cannot be followed (\(error))")))
            }
        } else if retryAuthorization, status == 401 || status == 403 {
            state = .discarding(.authorizationRefused(status))
        } else if retryStatuses, Self.retryableStatuses.contains(status) {
            state = .discarding(.retryStatus(status, retryAfter: answered.retryAfter))
        } else {
            let hasBody = method == .GET && status >= 200 && status != 204 && status != 304
            // The declared length counts the bytes on the wire, also when they are compressed.
            let expected = hasBody ? answered.contentLength : nil
            var delivered = answered
            do {
                // A compressed success is decoded here; the head then says nothing of the coding or of a length,
                // which only the decoded body will tell. Error bodies are not read by anyone and stay as they are.
                if (200...299).contains(status) || status == 304, let coding = try ContentDecoder.coding(of: head.headers) {
                    guard status != 206 else {
                        throw OriginError.encoding.with("\(url.host) sent a range of a \(coding.rawValue) body, which cannot be decoded")
                    }
                    var headers = head.headers
                    headers.remove(name: "Content-Encoding")
                    headers.remove(name: "Content-Length")
                    // A strong tag names the compressed bytes, not the decoded ones: it can only be a weak one now
                    // (as nginx's gunzip does).
                    if let tag = headers.first(name: "ETag"), !tag.hasPrefix("W/") { headers.replaceOrAdd(name: "ETag", value: "W/" + tag) }
                    delivered = OriginResponseHead(status: status, headers: headers, url: url)
                    if hasBody { decoder = ContentDecoder(coding: coding) }
                }
            } catch {
                state = .discarding(.failedBeforeHead(error))
                return task.eventLoop.makeSucceededVoidFuture()
            }
            state = .delivering(received: 0, expected: expected)
            outcome.succeed(.delivered)
            task.deliverHead(delivered)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task _: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        received(part: buffer)
    }

    func received(part buffer: ByteBuffer) -> EventLoopFuture<Void> {
        // The origin is not waited for while the part is being taken; the wait starts again when it was.
        disarmWatchdog()
        let taken = receive(buffer)
        taken.whenComplete { [self] _ in
            switch state {
            case .delivering, .discarding, .waitingForHead: armWatchdog()
            case .done: break
            }
        }
        return taken
    }

    private func receive(_ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        switch state {
        case .delivering(let received, let expected):
            state = .delivering(received: received + buffer.readableBytes, expected: expected)
            guard let decoder else { return task.deliverBody(buffer) }
            do {
                return deliver(try decoder.decode(buffer, allocator: ByteBufferAllocator())[...])
            } catch {
                state = .done
                task.finish(.failure(error))
                return task.eventLoop.makeFailedFuture(error)  // stops the download
            }
        case .waitingForHead, .discarding, .done:
            return task.eventLoop.makeSucceededVoidFuture()
        }
    }

    /// Hands decoded pieces on one at a time, each after the handler took the one before.
    private func deliver(_ pieces: ArraySlice<ByteBuffer>) -> EventLoopFuture<Void> {
        guard let first = pieces.first else { return task.eventLoop.makeSucceededVoidFuture() }
        let rest = pieces.dropFirst()
        if rest.isEmpty { return task.deliverBody(first) }
        return task.deliverBody(first).flatMap { self.deliver(rest) }
    }

    func didFinishRequest(task _: HTTPClient.Task<Void>) throws {
        finished()
    }

    func finished() {
        disarmWatchdog()
        let previous = state
        state = .done
        switch previous {
        case .delivering(let received, let expected):
            if let expected, received < expected {
                task.finish(.failure(OriginError.truncated.with("\(received) of \(expected) bytes from \(url.host)")))
            } else if let decoder {
                do {
                    try decoder.finish()
                    task.finish(.success(()))
                } catch {
                    task.finish(.failure(error))
                }
            } else {
                task.finish(.success(()))
            }
        case .discarding(let result):
            outcome.succeed(result)
        case .waitingForHead:
            outcome.succeed(.failedBeforeHead(OriginError.network.with("no response head")))
        case .done:
            break
        }
    }

    func didReceiveError(task _: HTTPClient.Task<Void>, _ error: any Error) {
        failed(error)
    }

    func failed(_ error: any Error) {
        disarmWatchdog()
        let previous = state
        state = .done
        switch previous {
        case .waitingForHead:
            outcome.succeed(.failedBeforeHead(error))
        case .delivering:
            task.finish(.failure(OriginError.mapping(error, afterHead: true)))
        case .discarding(let result):
            // The swallowed body does not matter: the redirect or retry goes ahead.
            outcome.succeed(result)
        case .done:
            break
        }
    }
}
