import Foundation
import HLSTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import HLSProxy

/// `serve` listens with `SO_REUSEPORT` (so that `--take-over` can start the next version beside it), and first makes
/// sure no other socket listens on its address with a plain bind that never listens (``ProxyServer/refuseTakenAddress(host:port:)``).
@Suite struct ListenProbeTests {
    /// A socket of 127.0.0.1 with `SO_REUSEADDR`, bound to `port` (0: one the system chooses), listening or not, and
    /// its port (the caller closes it); a failed bind(2) or listen(2) throws its `IOError`.
    private static func socket(port: Int = 0, listening: Bool = true) throws -> (descriptor: CInt, port: Int) {
        let bound = try boundSocket(port: port)
        if listening, listen(bound.descriptor, 16) != 0 {
            let error = IOError(errnoCode: errno, reason: "listen(127.0.0.1:\(bound.port))")
            close(bound.descriptor)
            throw error
        }
        return bound
    }

    /// A socket of 127.0.0.1 with `SO_REUSEADDR` bound to `port` (0: one the system chooses), not listening, and its
    /// port; a failed bind(2) throws its `IOError` (`EADDRINUSE` for a port in use).
    private static func boundSocket(port: Int) throws -> (descriptor: CInt, port: Int) {
        let descriptor = Glibc.socket(AF_INET, CInt(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        var one: CInt = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<CInt>.size))
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: port)
        guard address.withSockAddr({ Glibc.bind(descriptor, $0, socklen_t($1)) }) == 0 else {
            let error = IOError(errnoCode: errno, reason: "bind(127.0.0.1:\(port))")
            close(descriptor)
            throw error
        }
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, Int(UInt16(bigEndian: bound.sin_port)))
    }

    /// A port below the ephemeral range (``startBelowTheEphemeralRange(_:)``) held by a socket bound to it that does not
    /// listen, and a listener beside it: the descriptors (the caller closes them) and the port. A port where either bind
    /// fails with `EADDRINUSE` is given up for another — something else holds it, and this is setup, not what is
    /// tested. (Two clean CI runs failed on such a bind, once in the ephemeral range and once below it, in a suite run
    /// in parallel with every other; what held the port was not found.)
    private static func heldListener() async throws -> (holder: CInt, listener: CInt, port: Int) {
        var held: (holder: CInt, listener: CInt, port: Int)?
        try await startBelowTheEphemeralRange { port in
            let holder = try boundSocket(port: port)
            do {
                held = (holder.descriptor, try socket(port: holder.port).descriptor, holder.port)
            } catch {
                close(holder.descriptor)
                throw error
            }
        }
        return try #require(held)
    }

    /// A listening socket of 127.0.0.1 and its port (the caller closes it).
    private static func listener() throws -> (descriptor: CInt, port: Int) { try socket() }

    /// A port another socket listens on is refused with `EADDRINUSE`; once it is free the probe passes, and leaves
    /// nothing listening there. The port is held meanwhile by a socket bound to it that does not listen (what the probe
    /// itself is, and lets bind beside it): once the listener closed, no connection of another test running at the same
    /// time can be given it as its own port, which made the probe fail now and then in a parallel run. A port the setup
    /// cannot bind is given up for another (``heldListener()``).
    @Test func theProbeRefusesATakenPortAndLeavesNothingListening() async throws {
        let (holder, descriptor, port) = try await Self.heldListener()
        defer { close(holder) }
        #expect {
            try ProxyServer.refuseTakenAddress(host: "127.0.0.1", port: port)
        } throws: { ($0 as? IOError)?.errnoCode == EADDRINUSE }
        close(descriptor)
        try ProxyServer.refuseTakenAddress(host: "127.0.0.1", port: port)
        #expect(throws: (any Error).self, "something listens where the probe bound") { _ = try LoopbackSocket.connect(port: port) }
    }

    /// A server that would share its socket does not start on an address another server listens on.
    @Test func aServerDoesNotStartBesideAnotherListeningOnItsAddress() async throws {
        let (descriptor, port) = try Self.listener()
        defer { close(descriptor) }
        await #expect(throws: (any Error).self) {
            let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory) { configuration in
                configuration.port = port
                configuration.listenSharing = .shareable
            }
            await harness.shutdown()
        }
    }

    /// A listener whose accept(2) fails for good is closed by NIO (any error but a shortage or `ECONNABORTED`: NIO's
    /// ServerSocketChannel fires the error, then closes): the proxy service then ends with
    /// ``ProxyServer/ListenerClosed`` naming the failure — `serve` exits with it — instead of running on, alive to a
    /// process check and refusing every connection. NIO's two steps are played on the real listener; the service may
    /// start after the close (it then must not bind a new listener: it did, and waited on it forever).
    @Test func aListenerThatFailsForGoodEndsTheServiceWithTheCause() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let listener = try #require(harness.server.listener)
        let service = Task { try await ProxyService(server: harness.server, gracePeriod: .seconds(1)).run() }
        try await listener.eventLoop.submit {
            listener.pipeline.fireErrorCaught(IOError(errnoCode: EINVAL, reason: "accept4(descriptor:addr:len:flags:)"))
            listener.close(promise: nil)
        }.get()
        let outcome = await service.result
        #expect(throws: ProxyServer.ListenerClosed.self) { try outcome.get() }
        if case .failure(let error as ProxyServer.ListenerClosed) = outcome {
            #expect((error.cause as? IOError)?.errnoCode == EINVAL, "\(error)")
            #expect("\(error)".contains("accept(2) failed"))
        }
    }

    /// A server stopped on purpose ends its service without an error.
    @Test func aStoppedListenerEndsTheServiceQuietly() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let service = Task { try await ProxyService(server: harness.server, gracePeriod: .seconds(1)).run() }
        harness.server.beginShutdown()
        try await service.value
    }
}
