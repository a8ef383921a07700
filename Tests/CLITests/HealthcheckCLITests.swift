import Foundation
import HLSTestSupport
import Testing

/// `hlscache healthcheck` (the container image's HEALTHCHECK) against a real `serve`: 0 on /healthz's 200, at the
/// listen address of the environment (a wildcard one asked on loopback) or at --url; 1 with a line on stderr for
/// another status and for a server that is gone.
@Suite struct HealthcheckCLITests {
    @Test func exitsZeroOnlyWhileTheServerAnswers200() async throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-health-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let (server, base) = try await CLI.startServe(cache: cache)
        defer { if server.isRunning { server.terminate() } }
        let port = try #require(base.split(separator: ":").last.map(String.init))
        // Generous bound: a loaded machine must not make a live server look unhealthy here.
        let wait = ["--timeout", "60"]

        let byURL = try await CLI.run(["healthcheck", "--url", base + "/healthz"] + wait, isolated: true)
        #expect(byURL.status == 0, "stderr: \(byURL.stderr)")
        #expect(byURL.stdout.contains("\(base)/healthz answered 200"))

        // As in the image: HLSCACHE_LISTEN is 0.0.0.0:PORT, asked on loopback.
        let byListen = try await CLI.run(["healthcheck"] + wait, environment: ["HLSCACHE_LISTEN": "0.0.0.0:\(port)"], isolated: true)
        #expect(byListen.status == 0, "stderr: \(byListen.stderr)")
        #expect(byListen.stdout.contains("http://127.0.0.1:\(port)/healthz answered 200"))

        let notHealth = try await CLI.run(["healthcheck", "--url", base + "/api/v1/no-such-endpoint"] + wait, isolated: true)
        #expect(notHealth.status == 1)
        #expect(notHealth.stderr.contains("answered 4"), "stderr: \(notHealth.stderr)")

        #expect(try await CLI.stop(server))
        // Nothing answers: a port bound and never listening. (The stopped server's own port is no dead port in a
        // parallel run: another test's server was given it and answered 200, once.)
        let dead = try ReservedPort()
        let gone = try await CLI.run(["healthcheck"] + wait, environment: ["HLSCACHE_LISTEN": "127.0.0.1:\(dead.port)"], isolated: true)
        #expect(gone.status == 1)
        #expect(gone.stderr.contains("healthcheck: http://127.0.0.1:\(dead.port)/healthz"), "stderr: \(gone.stderr)")
    }

    @Test func rejectsAURLThatIsNotHTTP() async throws {
        let result = try await CLI.run(["healthcheck", "--url", "ftp://127.0.0.1/healthz"], isolated: true)
        #expect(result.status == 64)
        #expect(result.stderr.contains("not an http or https URL"))
    }
}
