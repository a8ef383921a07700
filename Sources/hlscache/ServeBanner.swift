import Foundation
import ServiceLifecycle

/// Prints `serve`'s first line (the bound address) once the service group runs. The group traps SIGTERM and
/// SIGINT before it starts its services, so a script that signals `serve` as soon as it reads this line always
/// gets a graceful shutdown (exit 0), never the default action of the signal.
struct ServeBanner: Service {
    let line: String

    func run() async throws {
        ConsoleOutput.line(line)
        fflush(nil)
        try? await gracefulShutdown()
    }
}
