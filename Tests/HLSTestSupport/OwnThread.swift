import Foundation

/// Runs `body` in the calling task — so `#expect` and `Issue.record` still belong to the running test — but on a
/// thread of its own instead of Swift's cooperative pool.
///
/// Why: the cooperative pool has one thread per core (two here), and it is also the thread pool of libdispatch's
/// default queues. A test that blocks it (a child process waited for, a few hundred fsyncs, seconds of CPU-bound
/// checking) holds one of the two threads; two such tests stalled every other test of the process for up to 20 s
/// (measured with a lag probe), and timing-sensitive tests failed: a proxy's 3 s origin timeout, a client that
/// must see bytes while the origin is still sending. Blocking or long synchronous test bodies go through this.
///
/// Shared by several test modules through symbolic links (the original is in `Tests/CLITests`).
package func onOwnThread<T>(_ body: () async throws -> T) async rethrows -> T {
    let executor = OwnThreadExecutor()
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor) { try await body() }
}

/// A task executor with one dedicated thread, stopped when its user is done.
package final class OwnThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopped = false

    package init() {
        Thread.detachNewThread { [self] in run() }
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let queued = condition.withLock {
            guard !stopped else { return false }
            jobs.append(job)
            condition.signal()
            return true
        }
        // A task started inside `body` inherits the preference and may run after it: give it a thread too.
        if !queued { Thread.detachNewThread { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) } }
    }

    /// Lets the thread end once no job is left; later jobs get a thread each.
    package func stop() {
        condition.withLock {
            stopped = true
            condition.signal()
        }
    }

    private func run() {
        while true {
            let next: UnownedJob? = condition.withLock {
                while jobs.isEmpty && !stopped { condition.wait() }
                return jobs.isEmpty ? nil : jobs.removeFirst()
            }
            guard let next else { return }
            next.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Reads `pipe` until the first line is complete (or the writer closed it) and returns what was read. Blocking:
/// call it inside ``onOwnThread(_:)``.
package func readFirstLine(of pipe: Pipe) -> String {
    var line = ""
    let handle = pipe.fileHandleForReading
    while !line.contains("\n") {
        let data = handle.availableData
        if data.isEmpty { break }
        line += String(decoding: data, as: UTF8.self)
    }
    return line
}
