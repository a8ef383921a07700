import Foundation
import HLSTestSupport
import NIOCore
import NIOPosix
import Testing

@testable import HLSProxy

/// `serve` listens with `SO_REUSEPORT` (so that `--take-over` can start the next version beside it), and first makes
/// sure no other socket listens on its address with a plain bind that never listens (``ProxyServer/refuseTakenAddress(host:port:)``).
@Suite struct ListenProbeTests {
    /// A listening socket of 127.0.0.1 and its port (the caller closes it).
    private static func listener() throws -> (descriptor: CInt, port: Int) {
        let descriptor = socket(AF_INET, CInt(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        let address = try SocketAddress(ipAddress: "127.0.0.1", port: 0)
        try #require(address.withSockAddr { bind(descriptor, $0, socklen_t($1)) } == 0)
        try #require(listen(descriptor, 16) == 0)
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, Int(UInt16(bigEndian: bound.sin_port)))
    }

    /// A port another socket listens on is refused with `EADDRINUSE`; once it is free the probe passes, and leaves
    /// nothing listening there.
    @Test func theProbeRefusesATakenPortAndLeavesNothingListening() throws {
        let (descriptor, port) = try Self.listener()
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

    /// A listener whose accept(2) fails for good is closed by NIO (any error but a shortage or `ECONNABORTED`): the
    /// proxy service then ends with ``ProxyServer/ListenerClosed`` naming the failure — `serve` exits with it —
    /// instead of running on, alive to a process check and refusing every connection. A real failing accept: the
    /// listening socket shut down for reading (Linux then fails accept(2) with `EINVAL`).
    @Test func aListenerThatFailsForGoodEndsTheServiceWithTheCause() async throws {
        let harness = try await ProxyHarness.start(serving: FileManager.default.temporaryDirectory)
        defer { Task { await harness.shutdown() } }
        let port = try #require(harness.server.localAddress?.port)
        let service = Task { try await ProxyService(server: harness.server, gracePeriod: .seconds(1)).run() }
        let descriptor = try #require(Self.listeningDescriptor(port: port), "no descriptor of this process listens on \(port)")
        #expect(shutdown(descriptor, CInt(SHUT_RD)) == 0)
        // Wakes the listener: accept(2) now fails.
        _ = try? LoopbackSocket.connect(port: port)
        let outcome = await service.result
        #expect(throws: ProxyServer.ListenerClosed.self) { try outcome.get() }
        if case .failure(let error as ProxyServer.ListenerClosed) = outcome {
            #expect((error.cause as? IOError)?.errnoCode == EINVAL, "\(error)")
        }
        #expect(throws: (any Error).self, "still accepting") { _ = try LoopbackSocket.connect(port: port) }
    }

    /// The descriptor of this process that listens on `port` (found in /proc/self/fd: NIO does not hand it out).
    private static func listeningDescriptor(port: Int) -> CInt? {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return nil }
        for name in names {
            guard let descriptor = CInt(name) else { continue }
            var accepting: CInt = 0
            var length = socklen_t(MemoryLayout<CInt>.size)
            guard getsockopt(descriptor, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0, accepting == 1 else { continue }
            var bound = sockaddr_in()
            var size = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &bound) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &size) }
            }
            if named == 0, bound.sin_family == sa_family_t(AF_INET), Int(UInt16(bigEndian: bound.sin_port)) == port { return descriptor }
        }
        return nil
    }
}
