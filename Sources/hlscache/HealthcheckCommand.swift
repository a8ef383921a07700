import ArgumentParser
import AsyncHTTPClient
import Foundation
import HLSConfig
import NIOCore

/// `hlscache healthcheck`: one `GET /healthz` of the running server; exit status 0 on 200, 1 on anything else. The
/// container image's `HEALTHCHECK` runs it, since that image has no shell and no curl.
struct HealthcheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Ask the running server for GET /healthz; exit 0 if it answers 200, else 1.",
        discussion: """
            By default it asks /healthz at the configured listen address (--listen is not an option here: `listen` \
            in the config file, else $HLSCACHE_LISTEN, else 127.0.0.1:8080; a wildcard address such as 0.0.0.0 is \
            asked on loopback). For a container HEALTHCHECK: the image has no shell or curl.
            """
    )

    @Option(name: .long, help: "The URL to ask instead (http or https). Default: http://LISTEN/healthz.")
    var url: String?

    @Option(name: .long, help: "Seconds to wait for the answer before calling the server unhealthy.")
    var timeout: Double = 5

    @Option(name: .long, help: SettingsOptions.configHelp)
    var config: String?

    func validate() throws {
        guard timeout > 0 else { throw ValidationError("--timeout must be more than 0 seconds") }
        if let url, URL(string: url)?.scheme.map({ ["http", "https"].contains($0.lowercased()) }) != true {
            throw ValidationError("--url \(url): not an http or https URL")
        }
    }

    func run() async throws {
        let target: String
        if let url {
            target = url
        } else {
            // A config error is already one line on stderr; the health check reports it as unhealthy (status 1).
            guard let loaded = try? SettingsOptions.load(configFile: config, commandLine: CommandLineSettings()) else {
                throw ExitCode(1)
            }
            target = loaded.settings.listen.localBaseURL + "/healthz"
        }
        let client = HTTPClient(
            eventLoopGroupProvider: .singleton, configuration: HTTPClient.Configuration(redirectConfiguration: .disallow))
        let status: UInt
        do {
            let response = try await client.execute(
                HTTPClientRequest(url: target), timeout: .milliseconds(Int64(timeout * 1000)))
            status = response.status.code
        } catch {
            try? await client.shutdown()
            ConsoleOutput.error("hlscache: healthcheck: \(target): \(error)")
            throw ExitCode(1)
        }
        try? await client.shutdown()
        guard status == 200 else {
            ConsoleOutput.error("hlscache: healthcheck: \(target) answered \(status)")
            throw ExitCode(1)
        }
        ConsoleOutput.line("healthy: \(target) answered 200")
    }
}
