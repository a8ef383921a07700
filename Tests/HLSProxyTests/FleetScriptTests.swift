import Foundation
import HLSTestSupport
import Testing

/// scripts/fleet-check.sh: three `serve` processes behind HAProxy (consistent URI hashing, health checks on /readyz),
/// ffmpeg playing an AES-128 stream through the balancer, one origin fetch and one node per object, a node killed
/// during playback, a prewarm through the balancer played offline (docs/scale-out.md).
@Suite(.serialized) struct FleetScriptTests {
    static let haproxy = ["/usr/sbin/haproxy", "/usr/bin/haproxy"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(.enabled(if: haproxy != nil, "haproxy is not installed (apt-get install haproxy, or make test-deps)"))
    func aFleetBehindHAProxyPlaysKeepsOneCopyPerObjectAndSurvivesANodeKilled() async throws {
        let (status, log) = try await ScriptRun.run("scripts/fleet-check.sh")
        #expect(status == 0, "fleet-check.sh failed:\n\(log.suffix(3000))")
        #expect(log.contains("PASS: fleet of 3"), "\(log.suffix(3000))")
    }
}
