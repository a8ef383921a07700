import Foundation
import HLSTestSupport
import Testing

/// Runs `scripts/crash-cycles.sh 10` against the real binary: `serve` and `fetch` SIGKILLed at random moments,
/// the cache checked against its index and the origin after every recovery, and the interrupted item resumed
/// to completion (the long run, 50+ cycles, is recorded in docs/reliability.md).
@Suite(.serialized) struct CrashCyclesScriptTests {
    @Test func tenCrashCyclesLeaveAConsistentCacheAndTheItemCompletes() async throws {
        let (status, log) = try await ScriptRun.run("scripts/crash-cycles.sh", ["10"])
        #expect(status == 0, "crash-cycles.sh failed:\n\(log.suffix(3000))")
        #expect(log.contains("PASS: 10 cycles"), "\(log.suffix(3000))")
        #expect(log.contains(", 0 wrong;"))
    }
}
