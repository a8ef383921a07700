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
    /// A 502/503/504 to retry; its body was discarded.
    case retryStatus(Int)
    /// The exchange failed before any head arrived.
    case failedBeforeHead(any Error)
}

/// The AsyncHTTPClient delegate of one attempt. It decides at the head whether the response is the one to
/// deliver (then it forwards head and body to the task, keeping AHC's backpressure) or one to swallow
/// (redirect, retryable status). AHC calls it on the task's event loop only (`.delegate(on:)`), and all its
/// mutable state is touched there, hence the unchecked Sendable.
final class OriginAttemptDelegate: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = Void

    private enum State {
        case waitingForHead
        case delivering(received: Int, expected: Int?)
        case discarding(OriginAttemptOutcome)
        case done
    }

    private var state = State.waitingForHead
    private let url: OriginURL
    private let method: OriginMethod
    private let retryStatuses: Bool
    private let task: OriginTask
    private let outcome: EventLoopPromise<OriginAttemptOutcome>

    /// - Parameter retryStatuses: whether a 502/503/504 may be swallowed for a retry (retries are left).
    init(url: OriginURL, method: OriginMethod, retryStatuses: Bool, task: OriginTask) {
        self.url = url
        self.method = method
        self.retryStatuses = retryStatuses
        self.task = task
        self.outcome = task.eventLoop.makePromise()
    }

    var futureOutcome: EventLoopFuture<OriginAttemptOutcome> { outcome.futureResult }

    static let redirectStatuses: Set<Int> = [301, 302, 303, 307, 308]
    static let retryableStatuses: Set<Int> = [502, 503, 504]

    func didReceiveHead(task _: HTTPClient.Task<Void>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        let status = Int(head.status.code)
        if Self.redirectStatuses.contains(status), let location = head.headers.first(name: "Location"),
            let target = try? OriginURL(URIResolver(baseURL: url.string).resolve(location))
        {
            state = .discarding(.redirect(target, status: status))
        } else if retryStatuses, Self.retryableStatuses.contains(status) {
            state = .discarding(.retryStatus(status))
        } else {
            let responseHead = OriginResponseHead(status: status, headers: head.headers, url: url)
            let hasBody = method == .GET && status >= 200 && status != 204 && status != 304
            state = .delivering(received: 0, expected: hasBody ? responseHead.contentLength : nil)
            outcome.succeed(.delivered)
            task.deliverHead(responseHead)
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task _: HTTPClient.Task<Void>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        switch state {
        case .delivering(let received, let expected):
            state = .delivering(received: received + buffer.readableBytes, expected: expected)
            return task.deliverBody(buffer)
        case .waitingForHead, .discarding, .done:
            return task.eventLoop.makeSucceededVoidFuture()
        }
    }

    func didFinishRequest(task _: HTTPClient.Task<Void>) throws {
        let previous = state
        state = .done
        switch previous {
        case .delivering(let received, let expected):
            if let expected, received < expected {
                task.finish(.failure(OriginError.truncated.with("\(received) of \(expected) bytes from \(url.host)")))
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
