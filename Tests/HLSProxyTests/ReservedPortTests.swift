import Foundation
import HLSTestSupport
import NIOCore
import Testing

/// A dead origin must stay dead for the whole test: ``ReservedPort`` refuses connections and no server can be
/// started on it meanwhile (a stopped ``TestOrigin``'s port could be, by the next test to bind port 0).
@Suite struct ReservedPortTests {
    @Test func aReservedPortRefusesConnectionsAndCannotBeTaken() async throws {
        let reserved = try ReservedPort()
        #expect(throws: LoopbackSocket.ConnectFailed.self) { try LoopbackSocket.connect(port: reserved.port) }
        let intruder = TestOrigin(root: FileManager.default.temporaryDirectory)
        await #expect(throws: (any Error).self, "another server bound the reserved port") { try await intruder.start(port: reserved.port) }
        await intruder.stop()
        withExtendedLifetime(reserved) {}
    }
}
