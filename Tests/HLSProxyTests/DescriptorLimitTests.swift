import Foundation
import HLSTestSupport
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import Testing

@testable import HLSProxy

#if canImport(Glibc)
    import Glibc
#endif

/// Out of file descriptors: `serve` raises its soft limit to the hard one, holds `limits.maxConnections` below what
/// the limit leaves, and pauses accepting when accept(2) fails instead of calling it again at once (it spun at
/// 150 % CPU serving nobody). The real binary runs under a low `ulimit -n` in a shell of its own.
@Suite(.serialized)
struct DescriptorLimitTests {
    @Test func theReserveKeepsDescriptorsForCacheFilesAndOriginSockets() {
        #expect(DescriptorLimit.reserve(for: 256) == 128)
        #expect(DescriptorLimit(soft: 256, hard: 256).connectionCap == 128)
        #expect(DescriptorLimit(soft: 1024, hard: 4096).connectionCap == 768)
        #expect(DescriptorLimit(soft: 4096, hard: 4096).maxConnections(configured: 4096) == 3072)
        #expect(DescriptorLimit(soft: 1 << 20, hard: 1 << 20).maxConnections(configured: 4096) == 4096)
        #expect(DescriptorLimit(soft: 64, hard: 64).connectionCap == 32)
        #expect(DescriptorLimit(soft: 1, hard: 1).connectionCap == 1)
    }

    /// The headroom check finds the lowest free descriptor by duplicating one and closing the copy: below the
    /// ceiling there is room, at or above it none, and it leaves nothing open behind it.
    @Test func theHeadroomLooksAtTheLowestFreeDescriptor() throws {
        #expect(DescriptorHeadroom.headroom(for: 64) == 16)
        #expect(DescriptorHeadroom.headroom(for: 1024) == 128)
        #expect(DescriptorHeadroom.headroom(for: 1 << 20) == 256)
        let roomy = try #require(DescriptorHeadroom(limit: 1 << 30, headroom: 8))
        let full = try #require(DescriptorHeadroom(limit: 8, headroom: 8))
        let before = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
        for _ in 0..<10_000 {
            #expect(roomy.hasRoom())
            #expect(!full.hasRoom())
        }
        // Other tests open and close their own meanwhile; a copy left open per check would be 20,000 more.
        let after = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
        #expect(after < before + 1_000, "\(before) → \(after) descriptors open")
        // One line, then at most one a minute with the count.
        let start = NIODeadline.now()
        #expect(full.refused(now: start)?.contains("at most 8 of 8 free") == true)
        #expect(full.refused(now: start + .seconds(1)) == nil)
        #expect(full.refused(now: start + .seconds(61))?.contains("2 connection(s) closed at accept") == true)
    }

    @Test func theListenerBacksOffWhenAcceptFails() async throws {
        let capture = LogCapture()
        let harness = try await ProxyHarness.start(
            serving: FileManager.default.temporaryDirectory, logger: capture.logger(label: "hlscache"))
        defer { Task { await harness.shutdown() } }
        let listener = try #require(harness.server.listener)
        // accept(2) failing with EMFILE reaches the listening channel's pipeline as this error (NIO's
        // ServerSocketChannel): the back-off handler holds the next accept for a moment, counts it and says so once.
        try await listener.eventLoop.submit { listener.pipeline.fireErrorCaught(IOError(errnoCode: EMFILE, reason: "accept")) }.get()
        // Answered once accepting resumes by itself.
        let metrics = try await harness.get(harness.base + "/metrics")
        #expect(try await listener.getOption(ChannelOptions.autoRead).get() == true)
        let backoffs = metrics.text.split(separator: "\n").first { $0.hasPrefix("hlscache_accept_backoffs_total ") }
        #expect(backoffs.flatMap { Double($0.split(separator: " ").last ?? "") } == 1, "\(backoffs ?? "no metric")")
        #expect(capture.captured.filter { $0.contains("out of file descriptors") }.count == 1, "\(capture.captured)")
        var report = AcceptFailureReport()
        let start = NIODeadline.now()
        let emfile = IOError(errnoCode: EMFILE, reason: "accept")
        #expect(report.failed(emfile, now: start)?.contains("out of file descriptors") == true)
        #expect(report.failed(emfile, now: start + .seconds(1)) == nil, "one line, then counted")
        #expect(report.failed(emfile, now: start + .seconds(59)) == nil)
        #expect(report.failed(emfile, now: start + .seconds(61))?.contains("3 failed accept(s)") == true)
    }

    /// The pause itself, on a real listening channel: after a failed accept the socket no longer reads (`autoRead`
    /// off takes it out of epoll whatever NIO's read state — a failed accept at the start of a batch left the read
    /// pending, and NIO's own back-off let the loop call accept(2) again at once); once the pause ends, or the handler
    /// goes, it reads again. The pause is an hour here so that no clock decides what is seen.
    @Test func aFailedAcceptTakesTheListenerOutOfEpollUntilThePauseEnds() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        let paused = NIOLockedValueBox(0)
        let listener = try await ServerBootstrap(group: group)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        AcceptPauseHandler { _ in
                            paused.withLockedValue { $0 += 1 }
                            return .hours(1)
                        }, name: "pause")
                }
            }
            .childChannelInitializer { $0.eventLoop.makeSucceededVoidFuture() }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { listener.close(promise: nil) }
        #expect(try await listener.getOption(ChannelOptions.autoRead).get() == true)
        try await listener.eventLoop.submit { listener.pipeline.fireErrorCaught(IOError(errnoCode: EMFILE, reason: "accept")) }.get()
        #expect(try await listener.getOption(ChannelOptions.autoRead).get() == false)
        // A second failure while paused counts, and does not stack another pause.
        try await listener.eventLoop.submit { listener.pipeline.fireErrorCaught(IOError(errnoCode: ENFILE, reason: "accept")) }.get()
        #expect(paused.withLockedValue { $0 } == 2)
        try await listener.pipeline.removeHandler(name: "pause").get()
        #expect(try await listener.getOption(ChannelOptions.autoRead).get() == true)
    }

    /// A connection the headroom turns away, on a real listening channel: it is closed before it reaches a child
    /// loop (the client reads end-of-file), and the listener leaves epoll as after a failed accept. The pause is an
    /// hour so that no clock decides what is seen.
    @Test func aConnectionTurnedAwayIsClosedAndTheListenerPauses() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        defer { group.shutdownGracefully { _ in } }
        let refused = NIOLockedValueBox(0)
        let initialized = NIOLockedValueBox(0)
        let listener = try await ServerBootstrap(group: group)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        AcceptPauseHandler(
                            pause: { _ in .hours(1) },
                            refuse: {
                                refused.withLockedValue { $0 += 1 }
                                return .hours(1)
                            }))
                }
            }
            .childChannelInitializer { channel in
                initialized.withLockedValue { $0 += 1 }
                return channel.eventLoop.makeSucceededVoidFuture()
            }
            .bind(host: "127.0.0.1", port: 0).get()
        defer { listener.close(promise: nil) }
        let port = try #require(listener.localAddress?.port)
        // The client connects (the kernel completes it from the backlog) and waits for the server to close it.
        let read = await onOwnThread { () -> Int in
            guard let fd = try? LoopbackSocket.connect(port: port, readTimeout: 60) else { return -2 }
            defer { close(fd) }
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, 0)
        }
        #expect(read == 0, "the client read \(read) (0: closed by the server; -1: nothing within 60 s)")
        #expect(refused.withLockedValue { $0 } == 1)
        #expect(initialized.withLockedValue { $0 } == 0, "a refused connection never reaches its loop's initializer")
        #expect(try await listener.getOption(ChannelOptions.autoRead).get() == false)
    }

    /// 400 idle connections to a server allowed 256 descriptors: it holds what it may (128), refuses the rest at
    /// accept before descriptors run out, stays cool, and answers `/healthz` once its idle timeout has closed the
    /// idle ones.
    @Test func fourHundredIdleConnectionsUnderUlimit256() async throws {
        let run = try await Served.start(ulimit: 256)
        defer { run.stop() }
        #expect(run.log.contains("limits.maxConnections lowered from 4096 to 128"), "\(run.log)")
        let outcome = try await run.flood(connections: 400)
        #expect(outcome.healthzAnswered, "\(outcome); \(run.state)")
        // Spinning on accept burned more CPU than wall time (150 % on two cores); idle, the server uses next to none.
        // Generous: half of the elapsed time, plus two seconds for the accepts themselves on a slow debug build.
        #expect(outcome.cpuSeconds < outcome.elapsedSeconds * 0.5 + 2, "\(outcome)")
        let metrics = try await run.metrics()
        #expect(metrics.counter("hlscache_accept_backoffs_total") == 0, "accept failed: \(run.log)")
    }

    /// So few descriptors (64) that the server has about 40 open before it listens, and `limits.maxConnections`
    /// (32, half the limit) cannot keep the flood from taking the rest. accept(2) failed with `EMFILE` on every flood,
    /// and about one run in four the process died of it: libdispatch's thread-pool monitor could not open
    /// `/proc/TID/stat` and aborted (SIGILL, "workq: registered worker exited prematurely"). Now the connections that
    /// would leave 16 descriptors or fewer free are closed at accept (DescriptorHeadroom): accept never fails, and
    /// the server is still there to answer.
    @Test func underUlimit64TheFloodIsRefusedBeforeDescriptorsRunOut() async throws {
        let run = try await Served.start(ulimit: Served.tightLimit)
        defer { run.stop() }
        let flooded = ContinuousClock.now
        let outcome = try await run.flood(connections: 200)
        #expect(outcome.healthzAnswered, "\(outcome); \(run.state)")
        #expect(outcome.cpuSeconds < outcome.elapsedSeconds * 0.5 + 2, "\(outcome)")
        let metrics = try await run.metrics()
        #expect(metrics.counter("hlscache_accept_backoffs_total") == 0, "accept failed: \(run.log)")
        #expect((metrics.counter("hlscache_descriptor_refusals_total") ?? 0) >= 1, "\(metrics.text)")
        #expect(run.process.isRunning, "\(run.state)")
        // One line when it starts refusing, then at most one counting line a minute.
        let minutes = Int((ContinuousClock.now - flooded).components.seconds / 60)
        let lines = run.log.split(separator: "\n").filter { $0.contains("file descriptors running low") }
        #expect(lines.filter { $0.contains("at most 16 of 64 free") }.count == 1, "\(lines)")
        #expect(lines.count <= 1 + minutes, "more than one line a minute over \(minutes) minute(s): \(lines)")
        #expect(!run.log.contains("cannot accept connections"), "\(run.log)")
    }

    /// Below 64, or with so many descriptors open before it listens that the headroom kept free leaves no room for a
    /// connection, `serve` says so and how much it needs.
    @Test func theRoomToServeIsCheckedBeforeListening() {
        #expect(DescriptorLimit.tooLowToServe(soft: 32, lowestFree: nil, extra: 0)?.contains("serve needs at least 64") == true)
        #expect(DescriptorLimit.tooLowToServe(soft: 63, lowestFree: 3, extra: 0) != nil)
        #expect(DescriptorLimit.tooLowToServe(soft: 64, lowestFree: nil, extra: 0) == nil)
        // 64: 16 kept free; 30 open + 16 still to open + 16 + one connection = 63.
        #expect(DescriptorLimit.tooLowToServe(soft: 64, lowestFree: 30, extra: 16) == nil)
        let crowded = DescriptorLimit.tooLowToServe(soft: 64, lowestFree: 41, extra: 16)
        #expect(crowded?.contains("holds 41 descriptors before it listens and keeps 16 free") == true, "\(crowded ?? "")")
        #expect(crowded?.contains("raise it to at least 74") == true, "\(crowded ?? "")")
        #expect(DescriptorLimit.tooLowToServe(soft: 1 << 20, lowestFree: 5_000, extra: 16) == nil)
        #expect(DescriptorLimit.tooLowToServe(soft: Int.max, lowestFree: 5_000, extra: 16) == nil)
    }

    /// Too few descriptors to serve anyone is a configuration error (78) said in one line, not a crash where NIO or
    /// libdispatch run out (under `ulimit -n 32` the server died of SIGILL) nor a server that runs on turning every
    /// connection away (`ulimit -n 64` with 16 descriptors inherited from its parent: about 60 in use once it listens,
    /// 16 kept free).
    @Test func tooFewDescriptorsToServeIsAConfigurationError() async throws {
        let low = try await Served.refusal(ulimit: 32, inheriting: 0)
        #expect(low.exited && low.status == 78, "\(low)")
        #expect(low.log.contains("hlscache: config error: the file descriptor limit is 32 (ulimit -n): serve needs at least 64"), "\(low)")
        let crowded = try await Served.refusal(ulimit: 64, inheriting: 16)
        #expect(crowded.exited && crowded.status == 78, "\(crowded)")
        #expect(crowded.log.contains("which leaves no room for a connection; raise it to at least"), "\(crowded)")
    }

    /// `hlscache serve` under `ulimit -n LIMIT` with idle and head timeouts of 2 s.
    final class Served: @unchecked Sendable {
        /// Enough for the server to start (its own descriptors: event loops, SQLite, the log) and little more.
        static let tightLimit = 64

        let process: ChildProcess
        let logFile: URL
        let cache: URL
        let port: Int

        var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

        /// For a failure's message: whether the server still runs, its open descriptors and the end of its log.
        var state: String {
            let pid = process.processIdentifier
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count).map(String.init) ?? "?"
            return "server running: \(process.isRunning), \(descriptors) descriptors open, log: …\(log.suffix(3000))"
        }

        private init(process: ChildProcess, logFile: URL, cache: URL, port: Int) {
            self.process = process
            self.logFile = logFile
            self.cache = cache
            self.port = port
        }

        /// How a `serve` that should refuse to start ended: whether it exited (else a signal ended it, or it still
        /// ran after two minutes and was killed), its status and its output.
        struct Refusal: CustomStringConvertible {
            var exited: Bool
            var status: Int32
            var log: String
            var description: String { "exited: \(exited), status \(status), output: \(log.suffix(2000))" }
        }

        /// The shell command that runs `serve` on a free port under `ulimit -n ulimit` (nil: this process's limit).
        static func serveCommand(ulimit: Int?, cache: URL) -> String {
            (ulimit.map { "ulimit -n \($0) && " } ?? "")
                + "exec '\(CLI.binary.path)' serve --listen 127.0.0.1:0 --cache-dir '\(cache.path)' --no-access-log"
        }

        /// Runs `serve` under `ulimit -n ulimit` with `inheriting` more descriptors (`/dev/null`) open from its start,
        /// until it exits (at most two minutes).
        static func refusal(ulimit: Int, inheriting: Int) async throws -> Refusal {
            let base = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fd-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: base) }
            let output = base.appendingPathComponent("serve.out")
            let errors = base.appendingPathComponent("serve.err")
            let extra = (0..<inheriting).map { _ in open("/dev/null", O_RDONLY | O_CLOEXEC) }
            defer { for descriptor in extra where descriptor >= 0 { close(descriptor) } }
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = [
                "-c",
                serveCommand(ulimit: ulimit, cache: base.appendingPathComponent("cache")),
            ]
            process.extraDescriptors = extra
            process.outputFiles = (output.path, errors.path)
            try process.run()
            let deadline = ContinuousClock.now + .seconds(120)
            while ContinuousClock.now < deadline, process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
            let ranOn = process.isRunning
            if ranOn {
                process.signal(SIGKILL)
                process.waitUntilExit()
            }
            let log = [output, errors].map { (try? String(contentsOf: $0, encoding: .utf8)) ?? "" }.joined()
            return Refusal(
                exited: !ranOn && process.terminationReason == .exit, status: process.terminationStatus,
                log: ranOn ? "still running after two minutes: \(log)" : log)
        }

        /// - Parameter ulimit: the descriptor limit of the shell that starts it; nil: this process's.
        static func start(ulimit: Int?) async throws -> Served {
            // This process opens the client side of every connection.
            _ = DescriptorLimit.raiseToHard()
            let base = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-fd-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
            let logFile = base.appendingPathComponent("serve.log")
            _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
            let cache = base.appendingPathComponent("cache")
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = [
                "-c",
                serveCommand(ulimit: ulimit, cache: cache),
            ]
            var environment = ProcessInfo.processInfo.environment
            environment["HLSCACHE_LIMITS_IDLE_TIMEOUT"] = "2s"
            environment["HLSCACHE_LIMITS_REQUEST_HEAD_TIMEOUT"] = "2s"
            environment["HLSCACHE_LOG_LEVEL"] = "info"
            process.environment = environment
            let handle = try FileHandle(forWritingTo: logFile)
            process.standardOutput = handle
            process.standardError = handle
            try process.run()
            try? handle.close()
            let deadline = ContinuousClock.now + .seconds(120)
            while ContinuousClock.now < deadline, process.isRunning {
                let text = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                if let range = text.range(of: "http://127.0.0.1:") {
                    let digits = text[range.upperBound...].prefix { $0.isNumber }
                    if let port = Int(digits), port > 0 { return Served(process: process, logFile: logFile, cache: base, port: port) }
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            process.terminate()
            throw ChildProcess.SpawnError(
                call: "serve did not start: \((try? String(contentsOf: logFile, encoding: .utf8)) ?? "")", code: 0)
        }

        func stop() {
            process.terminate()
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: cache)
        }

        /// `/metrics`, asked until answered (the flood's connections may still wait in the accept queue, and a
        /// connection made meanwhile can be refused or reset).
        func metrics() async throws -> MetricsText {
            MetricsText(text: try #require(await answer("/metrics"), "/metrics was never answered; \(state)"))
        }

        struct MetricsText {
            var text: String
            /// The value of the unlabelled sample `name`.
            func counter(_ name: String) -> Double? {
                text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
            }
        }

        /// The server's resident memory (`VmRSS` in `/proc/PID/status`), in bytes.
        var residentBytes: Int {
            guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
                let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
            else { return 0 }
            return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
        }

        /// CPU seconds (user + system) the server used so far, from `/proc/PID/stat`.
        struct CPUUnreadable: Error {}

        /// The server's CPU time so far; throws when /proc cannot tell (0 would pass any CPU check).
        func cpuSeconds() throws -> Double {
            guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { throw CPUUnreadable() }
            // After the command name: state is field 3, utime and stime are fields 14 and 15.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { throw CPUUnreadable() }
            return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }

        struct Outcome: CustomStringConvertible {
            var healthzAnswered: Bool
            var cpuSeconds: Double
            var elapsedSeconds: Double
            var description: String { "healthz \(healthzAnswered), \(cpuSeconds) s of CPU in \(elapsedSeconds) s" }
        }

        /// The response to `GET path` (status 200), asked on a new connection each time until the server answers, or
        /// nil after 300 s. While the server is out of descriptors a connection may be refused or reset, or wait in the
        /// accept queue behind held ones: not yet, try again. The bound is generous: a loaded machine drains the
        /// queue (the held connections go 2 s idle timeout at a time) slowly — 120 s was exceeded at load 15.
        func answer(_ path: String) async -> String? {
            let deadline = ContinuousClock.now + .seconds(300)
            while ContinuousClock.now < deadline {
                let response =
                    (try? await RawHTTP.exchange(
                        port: port, Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8), readTimeout: 60))?.response
                    ?? ""
                if response.hasPrefix("HTTP/1.1 200") { return response }
                try? await Task.sleep(for: .milliseconds(100))
            }
            return nil
        }

        /// Opens `connections` connections that send nothing, then asks `/healthz` (each attempt on a new
        /// connection) until it is answered — once the server's idle timeout has closed the ones it held — or
        /// 300 s have passed. The connections stay open meanwhile; the CPU the server used is measured across.
        func flood(connections count: Int) async throws -> Outcome {
            let cpuBefore = try cpuSeconds()
            let started = ContinuousClock.now
            let port = self.port
            let sockets = await onOwnThread { () -> [Int32] in
                var sockets: [Int32] = []
                for _ in 0..<count {
                    guard let fd = try? LoopbackSocket.connect(port: port) else { continue }
                    sockets.append(fd)
                }
                return sockets
            }
            defer { for fd in sockets { close(fd) } }
            let answered = await answer("/healthz") != nil
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            return Outcome(healthzAnswered: answered, cpuSeconds: try cpuSeconds() - cpuBefore, elapsedSeconds: seconds)
        }
    }
}
