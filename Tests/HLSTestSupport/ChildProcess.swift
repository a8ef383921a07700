import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`: the part of Foundation's `Process` the tests use, with the same
/// names.
///
/// Why not `Process`: on Linux, `Process.run()` (swift-corelibs-foundation with Swift 6.3.1) lists `/proc/self/fd`
/// and copies each `dirent`'s whole 256-byte name field; a record at the end of glibc's buffer with an unmapped page
/// after it crashes the test process (SIGSEGV in `memcpy`, seen once in about six full runs here, fixed upstream
/// in swift-corelibs-foundation PR #5472). This does what `Process.run()` does without that listing: the child's
/// descriptors above 2 are closed with `posix_spawn_file_actions_addclosefrom_np`, it gets its own process group, and
/// (unlike `Process`) every signal back at its default disposition and an empty signal mask — a test runner that
/// ignores SIGTERM no longer passes that on.
///
/// Beyond `Process`: ``extraDescriptors`` become the child's 3, 4, … (headless Chromium's DevTools pipe), and
/// ``killGroup(_:)`` signals the child's whole process group (a browser and its helpers).
package final class ChildProcess: @unchecked Sendable {
    package enum TerminationReason: Sendable { case exit, uncaughtSignal }

    package var executableURL: URL?
    package var arguments: [String] = []
    /// nil: this process's environment.
    package var environment: [String: String]?
    /// A `Pipe`, a `FileHandle`, or nil to inherit this process's.
    package var standardInput: Any?
    package var standardOutput: Any?
    package var standardError: Any?
    /// Descriptors of this process the child gets as its 3, 4, …, in this order (this process keeps its own).
    package var extraDescriptors: [Int32] = []
    /// Files the child opens itself as its standard output and error (created or truncated), in place of
    /// ``standardOutput`` and ``standardError``: this process holds no descriptor for them, so a descriptor closed
    /// twice elsewhere in the test process (which once landed on a pipe's read end: a CLI test read an empty stderr)
    /// cannot take the child's output away.
    package var outputFiles: (standardOutput: String, standardError: String)?

    private let lock = NSLock()
    private var pid: pid_t = 0
    private var status: Int32?

    package init() {}

    /// glibc 2.34+; Swift's Glibc module does not export the `_np` functions, so it is looked up by name.
    private static let addCloseFrom: @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32 = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            fatalError("posix_spawn_file_actions_addclosefrom_np is missing (glibc 2.34 or later is needed)")
        }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    package var processIdentifier: Int32 { lock.withLock { pid } }

    package struct SpawnError: Error, CustomStringConvertible {
        package var call: String
        package var code: Int32
        package init(call: String, code: Int32) {
            self.call = call
            self.code = code
        }
        package var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
    }

    package func run() throws {
        guard let executable = executableURL?.path else { throw SpawnError(call: "run (no executableURL)", code: EINVAL) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // Standard streams and the extra descriptors, then every other descriptor closed in the child.
        var closeInParent: [FileHandle] = []
        var wiring: [(source: Int32, target: Int32)] = []
        var unusablePipe = false
        func wire(_ stream: Any?, to target: Int32, childEnd: (Pipe) -> FileHandle) {
            if let pipe = stream as? Pipe {
                // Foundation's Pipe gives descriptors of -1 when pipe(2) fails (out of descriptors): not "no stream".
                if childEnd(pipe).fileDescriptor < 0 { unusablePipe = true }
                wiring.append((childEnd(pipe).fileDescriptor, target))
                closeInParent.append(childEnd(pipe))
            } else if let handle = stream as? FileHandle {
                wiring.append((handle.fileDescriptor, target))
            }
        }
        wire(standardInput, to: 0, childEnd: { $0.fileHandleForReading })
        wire(standardOutput, to: 1, childEnd: { $0.fileHandleForWriting })
        wire(standardError, to: 2, childEnd: { $0.fileHandleForWriting })
        for (index, descriptor) in extraDescriptors.enumerated() { wiring.append((descriptor, 3 + Int32(index))) }
        guard !unusablePipe else { throw SpawnError(call: "pipe", code: EMFILE) }
        // No descriptor (`FileHandle.nullDevice` has none): the child keeps this process's, as `Process` does.
        wiring.removeAll { $0.source < 0 }
        // Each source moved out of the way first (above any target), so none is overwritten before it is copied.
        let parked: Int32 = 1000
        for (index, entry) in wiring.enumerated() { posix_spawn_file_actions_adddup2(&actions, entry.source, parked + Int32(index)) }
        for (index, entry) in wiring.enumerated() { posix_spawn_file_actions_adddup2(&actions, parked + Int32(index), entry.target) }
        if let (output, error) = outputFiles {
            posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            posix_spawn_file_actions_addopen(&actions, 2, error, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }
        guard Self.addCloseFrom(&actions, 3 + Int32(extraDescriptors.count)) == 0 else {
            throw SpawnError(call: "posix_spawn_file_actions_addclosefrom_np", code: EINVAL)
        }

        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let environmentLines = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let envp = environmentLines.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let result =
            executable.contains("/")
            ? posix_spawn(&child, executable, &actions, &attributes, argv, envp)
            : posix_spawnp(&child, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw SpawnError(call: "posix_spawn \(executable)", code: result) }
        lock.withLock { pid = child }
        // As Process does: the child's ends belong to the child now, so reads see end-of-file when it exits.
        for handle in closeInParent { try? handle.close() }
    }

    /// Reaps the child if it has exited; with `block`, waits for it. The lock is never held while waiting, so
    /// another thread can still signal the child.
    private func reap(block: Bool) -> Int32? {
        let target: pid_t = lock.withLock { status == nil ? pid : 0 }
        guard target > 0 else { return lock.withLock { status } }
        var raw: Int32 = 0
        while true {
            let reaped = waitpid(target, &raw, block ? 0 : WNOHANG)
            if reaped == target {
                return lock.withLock {
                    status = raw
                    return raw
                }
            }
            if reaped == -1 && errno == EINTR { continue }
            // Still running (WNOHANG), or another thread reaped it and records its status.
            return lock.withLock { status }
        }
    }

    package var isRunning: Bool { lock.withLock { pid > 0 } && reap(block: false) == nil }

    /// Blocks the calling thread until the child exits.
    package func waitUntilExit() {
        guard lock.withLock({ pid > 0 }) else { return }
        while reap(block: true) == nil { usleep(10_000) }
    }

    /// Waits for exit without blocking a cooperative thread.
    package func waitForExit() async {
        while isRunning { try? await Task.sleep(for: .milliseconds(20)) }
    }

    /// Sends `number` to the child unless it has been reaped: never to a pid the system may have given to another
    /// process since (pid_max is 32768 on the test machine, where ~80 pids a second are used).
    package func signal(_ number: Int32) { send(number) }
    package func terminate() { send(SIGTERM) }
    package func interrupt() { send(SIGINT) }
    /// Sends `signal` to the child's process group (the child and what it started), while the child is not reaped.
    package func killGroup(_ signal: Int32 = SIGKILL) { send(signal, group: true) }

    private func send(_ number: Int32, group: Bool = false) {
        let target = lock.withLock { status == nil ? pid : 0 }
        if target > 0 { kill(group ? -target : target, number) }
    }

    private var raw: Int32 {
        precondition(status != nil || reap(block: false) != nil, "the child is still running")
        return lock.withLock { status ?? 0 }
    }

    /// The exit code, or the signal number that ended the child.
    package var terminationStatus: Int32 {
        let raw = self.raw
        return raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
    }

    package var terminationReason: TerminationReason { raw & 0x7f == 0 ? .exit : .uncaughtSignal }
}
