import Foundation
import HLSTestSupport
import Testing

/// scripts/iptv-soak.sh --volume (issue 31): an IPTV channel list of three channels from a local provider through a
/// real `serve` process — ffmpeg reads each rewritten channel URL for 10 s (one HLS channel only plays with the
/// User-Agent its #EXTVLCOPT names) — then three clients read the never-ending MPEG-TS channel at once at full speed:
/// one origin connection for all of them, closed after the last leaves; the server's RSS and cache directory,
/// sampled every 50 MB, do not grow with the 600 MB each client reads (flatness by volume, not by time).
@Suite(.serialized) struct IPTVSoakScriptTests {
    @Test func aLiveTSChannelForThreeClientsUsesOneOriginConnectionAndKeepsMemoryAndDiskFlat() async throws {
        let (status, log) = try await ScriptRun.run("scripts/iptv-soak.sh", ["--volume", "600"])
        #expect(status == 0, "iptv-soak.sh failed:\n\(log.suffix(4000))")
        #expect(log.contains("PASS: iptv"), "\(log.suffix(4000))")
    }
}
