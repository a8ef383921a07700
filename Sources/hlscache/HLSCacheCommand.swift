import ArgumentParser
import HLSCacheCore

@main
struct HLSCacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hlscache",
        abstract: "A local HLS proxy and cache server.",
        discussion: """
            Point a player at http://127.0.0.1:8080/{scheme}/{host}/{path} instead of the origin; \
            `hlscache url ORIGIN_URL` prints that address.
            """,
        version: HLSCacheVersion.current,
        subcommands: [
            ServeCommand.self, URLCommand.self, FetchCommand.self, ListCommand.self, ShowCommand.self, PauseCommand.self,
            ResumeCommand.self, RemoveCommand.self, LockCommand.self, UnlockCommand.self, SetCommand.self, VerifyCommand.self,
            KeysCommand.self, WatchCommand.self, ReloadCommand.self, PolicyCommand.self, HealthcheckCommand.self,
        ]
    )
}
