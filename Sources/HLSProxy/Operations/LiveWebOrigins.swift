import HLSCacheCore
import NIOConcurrencyHelpers
import Synchronization

/// `http.allowedWebOrigins` as the configuration or the last reload set it, read for every request without a lock the
/// event loops share: each connection keeps the policy it read with its version (``read(_:)``), and takes the lock
/// again only when a reload moved the version. A shared lock per request was ~1 % of a replayed playlist hit's CPU at 8
/// connections on two cores (docs/benchmarks.md, issue 39); the version is only ever read between reloads, so its cache
/// line stays on both cores.
final class LiveWebOrigins: Sendable {
    private let current: NIOLockedValueBox<(policy: WebOriginPolicy, version: Int)>
    private let version = Atomic<Int>(0)

    init(_ policy: WebOriginPolicy) {
        current = NIOLockedValueBox((policy, 0))
    }

    /// What a connection read last: the policy and the version it had.
    typealias Read = (policy: WebOriginPolicy, version: Int)

    /// The policy in force, `last` when it still is (no reload since), else read again (and kept in `last`).
    func read(_ last: inout Read?) -> WebOriginPolicy {
        if let kept = last, kept.version == version.load(ordering: .acquiring) { return kept.policy }
        let now = current.withLockedValue { $0 }
        last = now
        return now.policy
    }

    /// Replaces the policy: every request from now on, on new and open connections, is judged by `policy`.
    func set(_ policy: WebOriginPolicy) {
        current.withLockedValue { current in
            current = (policy, current.version + 1)
            version.store(current.version, ordering: .releasing)
        }
    }
}
