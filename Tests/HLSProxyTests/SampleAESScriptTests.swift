import Foundation
import HLSTestSupport
import Testing

/// scripts/sample-aes-check.sh (issue 31): a SAMPLE-AES MPEG-TS stream with an http key URI, encrypted here and
/// muxed by ffmpeg, played by ffmpeg through a real `serve` frame for frame as from the origin (and as the clear
/// stream), its key under /keys/ and never in the clear on disk; prewarmed by `fetch` into a fresh cache and played
/// with the origin stopped; an AES-256 playlist's 32-byte key served offline the same way.
@Suite(.serialized) struct SampleAESScriptTests {
    static let hasCryptography: Bool = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import cryptography"]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()

    @Test(.enabled(if: hasCryptography, "python3's cryptography module is missing (apt-get install python3-cryptography)"))
    func aSampleAESStreamPlaysThroughTheProxyAndOfflineWithItsKeySealed() async throws {
        let (status, log) = try await ScriptRun.run("scripts/sample-aes-check.sh")
        #expect(status == 0, "sample-aes-check.sh failed:\n\(log.suffix(4000))")
        #expect(log.contains("PASS: sample-aes"), "\(log.suffix(4000))")
    }
}
