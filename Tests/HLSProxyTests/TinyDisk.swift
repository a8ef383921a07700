import Foundation
import HLSTestSupport

/// A tmpfs of a few MiB in a mount namespace of its own (`unshare -Urm`: a user namespace, so no privilege is
/// needed where user namespaces are enabled), with a shell in it that runs the test's commands. What runs there
/// sees a real file system that fills up (`ENOSPC`), while the network and the rest of the file tree are the
/// test's. The test reads the tmpfs through `/proc/PID/root`; it vanishes with the shell.
final class TinyDisk: @unchecked Sendable {
    /// The mount point, as the commands see it (an empty directory outside).
    let path: String
    private let shell: ChildProcess
    private let input: FileHandle
    private let output: FileHandle
    private var buffered = Data()

    /// Whether this machine lets an unprivileged process mount a tmpfs in a namespace of its own.
    static let isAvailable: Bool = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-tinydisk-probe-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        guard (try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)) != nil,
            let unshare = executable("unshare")
        else { return false }
        let probe = ChildProcess()
        probe.executableURL = unshare
        probe.arguments = ["-Urm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs \"$1\"", "sh", directory.path]
        probe.standardOutput = FileHandle.nullDevice
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    static func executable(_ name: String) -> URL? {
        for directory in ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        where FileManager.default.isExecutableFile(atPath: "\(directory)/\(name)") {
            return URL(fileURLWithPath: "\(directory)/\(name)")
        }
        return nil
    }

    /// Mounts a tmpfs of `size` bytes (rounded up to pages) and starts the shell.
    init(size: Int) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hlscache-tinydisk-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.path
        shell = ChildProcess()
        shell.executableURL = Self.executable("unshare")
        // Each line read is a command; its output (stdout and stderr) is followed by a line `__done STATUS`.
        shell.arguments = [
            "-Urm", "sh", "-c",
            """
            mount -t tmpfs -o size="$1" tmpfs "$2" || exit 1
            echo __done 0
            while IFS= read -r line; do sh -c "$line" 2>&1 </dev/null; echo "__done $?"; done
            """,
            "sh", String(size), path,
        ]
        let stdin = Pipe(), stdout = Pipe()
        shell.standardInput = stdin
        shell.standardOutput = stdout
        shell.standardError = stdout
        try shell.run()
        input = stdin.fileHandleForWriting
        output = stdout.fileHandleForReading
        let mounted = try readResult()
        guard mounted.status == 0 else { throw Failure(message: "tmpfs not mounted: \(mounted.output)") }
    }

    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// The tmpfs seen from outside the namespace (for reading what the commands wrote).
    var outside: URL { URL(fileURLWithPath: "/proc/\(shell.processIdentifier)/root\(path)") }

    /// Runs one shell command line in the namespace and returns its exit status and output. Blocking: call it
    /// from a thread of its own (``onOwnThread(_:)``).
    func run(_ command: String) throws -> (status: Int32, output: String) {
        precondition(!command.contains("\n"), "one line")
        input.write(Data((command + "\n").utf8))
        return try readResult()
    }

    private func readResult() throws -> (status: Int32, output: String) {
        var lines: [String] = []
        while true {
            while let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffered[buffered.startIndex..<newline], as: UTF8.self)
                buffered.removeSubrange(buffered.startIndex...newline)
                if line.hasPrefix("__done ") {
                    return (Int32(line.dropFirst(7)) ?? -1, lines.joined(separator: "\n"))
                }
                lines.append(line)
            }
            let chunk = output.availableData
            guard !chunk.isEmpty else { throw Failure(message: "the namespace shell ended: \(lines.joined(separator: "\n"))") }
            buffered.append(chunk)
        }
    }

    /// Ends the shell (the tmpfs goes with it once nothing in the namespace holds it).
    func close() {
        try? input.close()
        shell.waitUntilExit()
        try? FileManager.default.removeItem(atPath: path)
    }
}
