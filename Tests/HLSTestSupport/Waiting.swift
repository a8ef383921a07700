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
