import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// VLC (`cvlc`) and mpv as the tests' real players (Debian packages `vlc` and `mpv`, `make test-deps`).
///
/// Both play in real time with no video or audio device (`--vout=dummy --aout=dummy`, `--vo=null --ao=null`) and say
/// what they did: VLC's `-vvv` log (each input's `EOF reached`, the pictures decoded), mpv's end of each file with the position
/// reached (a Lua script prints `time-pos` at `end-file`). VLC refuses to run as root: as root it runs as `nobody`
/// (`setpriv`) with a HOME of its own.
package enum RealPlayers {
    package enum Player: String, Sendable, CaseIterable, CustomStringConvertible {
        case vlc, mpv
        package var description: String { rawValue }
        package var executable: String { self == .vlc ? "/usr/bin/cvlc" : "/usr/bin/mpv" }
    }

    /// One file mpv finished: why (`eof`, `error`, `quit`, `redirect` for a list it opened), the position reached and
    /// the seconds played.
    package struct Ending: Sendable, Equatable {
        package var reason: String
        package var position: Double
        package var played: Double
    }

    package struct Run: Sendable {
        package var status: Int32
        /// stdout and stderr.
        package var log: String
        /// mpv: each file's end, in order.
        package var endings: [Ending]
        /// VLC: how many inputs reached their end (`main input debug: EOF reached`).
        package var vlcEndsReached: Int { log.components(separatedBy: "main input debug: EOF reached").count - 1 }
        /// VLC: the H.264 pictures its decoder (libavcodec, which logs each NAL unit at `-vvv`) decoded: one IDR or
        /// non-IDR slice per picture in the test streams.
        package var vlcPicturesDecoded: Int {
            log.split(separator: "\n").count { $0.contains("nal_unit_type: 1(") || $0.contains("nal_unit_type: 5(") }
        }
    }

    package static func isInstalled(_ player: Player) -> Bool {
        FileManager.default.isExecutableFile(atPath: player.executable)
    }

    /// Prints, at the end of each file, the position and the seconds played: the sum of the forward steps of
    /// `time-pos` (a stream's timestamps may start again after an `EXT-X-DISCONTINUITY`).
    private static let positionScript = """
        local last, played = -1, 0
        mp.observe_property("time-pos", "number", function(_, v)
          if v then
            if last >= 0 and v > last and v - last < 1 then played = played + (v - last) end
            last = v
          end
        end)
        mp.register_event("start-file", function() last, played = -1, 0 end)
        mp.register_event("end-file", function(e)
          io.stderr:write(string.format("hlscache-test end-file reason=%s position=%.3f played=%.3f\\n", tostring(e.reason), last, played))
        end)
        """

    /// Plays `url` to its end (a list: every entry in turn) and returns what the player said. `bound` only stops a
    /// player that hangs: the caller decides by what it did.
    package static func play(_ player: Player, url: String, bound: TimeInterval = 900) async throws -> Run {
        try await offThread { try playBlocking(player, url: url, bound: bound) }
    }

    private static func playBlocking(_ player: Player, url: String, bound: TimeInterval) throws -> Run {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-player-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        let logFile = work.appendingPathComponent("player.log")
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let process = ChildProcess()
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = work.path
        environment["XDG_RUNTIME_DIR"] = work.path
        environment["XDG_CONFIG_HOME"] = work.appendingPathComponent("config").path
        environment["XDG_DATA_HOME"] = work.appendingPathComponent("data").path
        environment["XDG_CACHE_HOME"] = work.appendingPathComponent("cache").path
        environment.removeValue(forKey: "DISPLAY")
        environment.removeValue(forKey: "WAYLAND_DISPLAY")
        process.environment = environment
        switch player {
        case .vlc:
            let arguments = [
                "-I", "dummy", "-vvv", "--vout=dummy", "--aout=dummy", "--play-and-exit", "--no-loop", "--no-repeat", "--no-random",
                // Every picture decoded however late (a loaded machine): the count of decoded pictures is what the
                // tests check, and VLC otherwise skips decoding pictures it is behind on.
                "--no-avcodec-hurry-up", "--avcodec-skip-frame=-1", "--no-drop-late-frames", "--no-skip-frames",
                url,
            ]
            if getuid() == 0 {
                // Everything VLC touches must be reachable by nobody: its HOME, and the directories above it.
                try makeReachable(work)
                process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", player.executable] + arguments
            } else {
                process.executableURL = URL(fileURLWithPath: player.executable)
                process.arguments = arguments
            }
        case .mpv:
            let script = work.appendingPathComponent("position.lua")
            try positionScript.write(to: script, atomically: true, encoding: .utf8)
            process.executableURL = URL(fileURLWithPath: player.executable)
            process.arguments = [
                "--no-config", "--vo=null", "--ao=null", "--ytdl=no", "--msg-level=all=v", "--script=" + script.path, url,
            ]
        }
        let log = try FileHandle(forWritingTo: logFile)
        defer { try? log.close() }
        process.standardOutput = log
        process.standardError = log
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let ended = NIOSafeBox<Bool>()
        let watchdog = Thread {
            let deadline = Date().addingTimeInterval(bound)
            while Date() < deadline {
                if ended.value == true { return }
                Thread.sleep(forTimeInterval: 0.5)
            }
            process.killGroup()
        }
        watchdog.start()
        process.waitUntilExit()
        ended.value = true
        let text = String(decoding: (try? Data(contentsOf: logFile)) ?? Data(), as: UTF8.self)
        var endings: [Ending] = []
        for line in text.split(separator: "\n") where line.hasPrefix("hlscache-test end-file ") {
            var reason = ""
            var position = -1.0
            var played = 0.0
            for field in line.split(separator: " ") {
                if field.hasPrefix("reason=") { reason = String(field.dropFirst("reason=".count)) }
                if field.hasPrefix("position=") { position = Double(field.dropFirst("position=".count)) ?? -1 }
                if field.hasPrefix("played=") { played = Double(field.dropFirst("played=".count)) ?? 0 }
            }
            endings.append(Ending(reason: reason, position: position, played: played))
        }
        return Run(status: process.terminationStatus, log: text, endings: endings)
    }

    /// Lets every user into `directory` (mode 0777) and through each directory above it this process owns (adds
    /// search permission only): a test run's temporary directory is made 0700.
    private static func makeReachable(_ directory: URL) throws {
        try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: directory.path)
        var parent = directory.deletingLastPathComponent()
        while parent.path != "/" && !parent.path.isEmpty {
            var info = stat()
            if stat(parent.path, &info) == 0, info.st_uid == getuid(), info.st_mode & 0o001 == 0 {
                chmod(parent.path, (info.st_mode & 0o7777) | 0o001)
            }
            parent = parent.deletingLastPathComponent()
        }
    }
}
