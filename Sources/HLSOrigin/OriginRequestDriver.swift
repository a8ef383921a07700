import HLSCacheCore
import NIOCore

/// Runs an ``OriginRequestStateMachine`` on its task's event loop: each action's I/O (destination check, exchange,
/// backoff timer, cookie refresh) reports back to the machine, whose answer is the next action. A request stops at
/// the first step after its task finished (cancelled, or the delegate delivered the head and finished it).
///
/// No Swift `Task` on the common path: a remembered (or numeric) destination, an exchange through AsyncHTTPClient,
/// redirects and retries all run as event-loop callbacks. Only what is `async` by nature takes one: resolving a name
/// the client does not remember, the cookie refresh of a 401/403, and connecting a raw exchange.
final class OriginRequestDriver: Sendable {
    private let client: OriginClient
    private let task: OriginTask
    private let headers: [OriginConfiguration.Field]
    /// Touched on the task's event loop only.
    private let machine: NIOLoopBoundBox<OriginRequestStateMachine>

    init(client: OriginClient, task: OriginTask, headers: [OriginConfiguration.Field], machine: OriginRequestStateMachine) {
        self.client = client
        self.task = task
        self.headers = headers
        self.machine = NIOLoopBoundBox.makeBoxSendingValue(machine, eventLoop: task.eventLoop)
    }

    /// Starts the request, on the task's event loop.
    func start() {
        if task.eventLoop.inEventLoop {
            run(machine.value.start())
        } else {
            task.eventLoop.execute { self.run(self.machine.value.start()) }
        }
    }

    private func run(_ action: OriginRequestStateMachine.Action) {
        task.eventLoop.assertInEventLoop()
        guard !task.isFinished else { return }
        switch action {
        case .checkDestination(let url):
            checkDestination(url)
        case .attempt(let url, let method, let addresses, let retryStatuses, let retryAuthorization):
            client.attempt(
                url: url, method: method, headers: headers, addresses: addresses, retryStatuses: retryStatuses,
                retryAuthorization: retryAuthorization, task: task
            ).whenComplete { result in
                switch result {
                case .success(let outcome): self.run(self.machine.value.attemptEnded(outcome))
                case .failure(let error): self.run(self.machine.value.attemptFailed(error))
                }
            }
        case .backoff(let retry, let retryAfter, let reason):
            client.logger.debug("origin retry", metadata: ["url": "\(machine.value.url)", "reason": "\(reason)", "retry": "\(retry)"])
            let timer = task.eventLoop.scheduleTask(in: client.backoffDelay(retry, retryAfter: retryAfter)) {
                self.run(self.machine.value.backoffEnded())
            }
            task.attach(abort: { timer.cancel() })
        case .redirected(let from, let to, let status, let then):
            client.logger.debug("origin redirect", metadata: ["from": "\(from)", "to": "\(to)", "status": "\(status)"])
            run(then)
        case .refreshCookies(let requested, let refused, let status):
            let client = self.client
            client.countAsyncStep()
            let refreshing = Task {
                if let page = await client.cookies.page(for: requested), page.string != requested.string {
                    client.logger.debug(
                        "origin refused, fetching the page that sets its cookies",
                        metadata: ["url": "\(refused.redacted)", "status": "\(status)", "page": "\(page.redacted)"])
                    await client.refreshCookies(from: page)
                }
                self.task.eventLoop.execute { self.run(self.machine.value.cookiesRefreshed()) }
            }
            task.attach(abort: { refreshing.cancel() })
        case .fail(let error):
            task.finish(.failure(error))
        case .none:
            break
        }
    }

    private func checkDestination(_ url: OriginURL) {
        switch client.checkRememberedDestination(url) {
        case .allowed(let addresses):
            run(machine.value.destinationChecked(addresses))
        case .refused(let error):
            refused(url, error)
        case .needsResolution:
            let client = self.client
            client.countAsyncStep()
            let resolving = Task {
                let result: Result<[OriginIPAddress], OriginError>
                do throws(OriginError) {
                    result = .success(try await client.checkDestination(url))
                } catch {
                    result = .failure(error)
                }
                self.task.eventLoop.execute {
                    switch result {
                    case .success(let addresses): self.run(self.machine.value.destinationChecked(addresses))
                    case .failure(let error): self.refused(url, error)
                    }
                }
            }
            task.attach(abort: { resolving.cancel() })
        }
    }

    private func refused(_ url: OriginURL, _ error: OriginError) {
        client.logger.notice("origin destination refused", metadata: ["url": "\(url.redacted)", "reason": "\(error.detail)"])
        run(machine.value.destinationRefused(error))
    }
}
