/// The value of `task`, or nil when it has not ended within `bound` (a generous bound for a stuck test, not a
/// measurement: on a loaded machine a task may take long, but one that should end does end well within it).
package func endedValue<T: Sendable>(of task: Task<T, any Error>, within bound: Duration) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { try? await task.value }
        group.addTask {
            try? await Task.sleep(for: bound)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Waits until `condition` holds, checking it every `interval`, and throws ``WaitTimeout`` naming `what` when it
/// still does not after `timeout`: the test fails where it waited, saying for what, instead of carrying on. The
/// bound is for a stuck test, not a measurement (events, not timing, decide the outcome): it costs nothing when the
/// event comes, so it is generous. In a full run on a loaded 2-core machine a test process starved for minutes: a
/// download and commit that take a second alone did not end within 120 s.
package func waitUntil(
    _ what: @autoclosure () -> String, timeout: Duration = .seconds(300), interval: Duration = .milliseconds(20),
    _ condition: () async throws -> Bool
) async throws {
    _ = try await eventually(what(), timeout: timeout, interval: interval) { try await condition() ? () : nil }
}

/// Waits until `check` returns a value, and returns it; like ``waitUntil(_:timeout:interval:_:)`` otherwise.
package func eventually<T>(
    _ what: @autoclosure () -> String, timeout: Duration = .seconds(300), interval: Duration = .milliseconds(20),
    _ check: () async throws -> T?
) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try await check() { return value }
        guard ContinuousClock.now < deadline else { throw WaitTimeout(what: what()) }
        try await Task.sleep(for: interval)
    }
}

/// What ``waitUntil(_:timeout:interval:_:)`` throws when the event it waited for did not come within its bound.
package struct WaitTimeout: Error, CustomStringConvertible {
    package var what: String
    package init(what: String) { self.what = what }
    package var description: String { "timed out waiting for \(what)" }
}
