#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import HLSCrypto

/// The AES-256 key that seals HLS keys at rest (docs/design.md §7).
///
/// Taken from `HLSCACHE_MASTER_KEY` (64 hex digits) when set, otherwise from `cache-dir/master.key`, which is
/// created with mode 0600 on first use. Its bytes are never printed: `description` shows only its ``id``.
package struct MasterKey: Sendable, CustomStringConvertible {
    /// The environment variable that overrides the file.
    package static let environmentVariable = "HLSCACHE_MASTER_KEY"
    /// The file name inside the cache directory.
    package static let fileName = "master.key"

    let bytes: [UInt8]
    /// A fingerprint (16 hex digits of SHA-256 over a label and the key) recorded with every sealed key, so a
    /// key sealed under another master key is reported as such instead of as damage.
    package let id: String

    /// Wraps 32 raw bytes.
    /// - Throws: ``KeyError/masterKey`` unless there are exactly 32.
    package init(bytes: [UInt8]) throws(KeyError) {
        guard bytes.count == AES256GCM.keyByteCount else {
            throw KeyError.masterKey.with("a master key has 32 bytes (64 hex digits), got \(bytes.count)")
        }
        self.bytes = bytes
        id = String(SHA256.hex(Array("hlscache master key id".utf8) + bytes).prefix(16))
    }

    /// Parses 64 hexadecimal digits (surrounding whitespace ignored).
    /// - Throws: ``KeyError/masterKey`` for anything else.
    package init(hex: String) throws(KeyError) {
        let text = hex.trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.utf8.count == 64, let bytes = MasterKey.decodeHex(text) else {
            throw KeyError.masterKey.with("expected 64 hexadecimal digits")
        }
        try self.init(bytes: bytes)
    }

    /// A fresh random key.
    package static func generate() throws(KeyError) -> MasterKey {
        do {
            return try MasterKey(bytes: SecureRandom.bytes(AES256GCM.keyByteCount))
        } catch let error as KeyError {
            throw error
        } catch {
            throw KeyError.masterKey.with("the system random generator failed: \(error)")
        }
    }

    /// The master key for a cache directory: `HLSCACHE_MASTER_KEY` from `environment` if set, otherwise
    /// `directory/master.key`, created (mode 0600) when missing.
    ///
    /// Two processes starting at once agree on one key: the file is written under a temporary name and
    /// hard-linked into place, which fails if the other process was first; then its key is read.
    /// - Throws: ``KeyError/masterKey`` when the variable or the file is malformed, the file is readable,
    ///   writable or executable by group or others, or it cannot be created.
    package static func load(directory: String, environment: [String: String]) throws(KeyError) -> MasterKey {
        if let value = environment[environmentVariable], !value.isEmpty {
            do {
                return try MasterKey(hex: value)
            } catch {
                throw KeyError.masterKey.with("\(environmentVariable) must be 64 hexadecimal digits")
            }
        }
        let path = directory + "/" + fileName
        if let existing = try readFile(path) { return existing }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw KeyError.masterKey.with("cannot create \(directory): \(error)")
        }
        let fresh = try generate()
        let temporary = path + ".\(getpid()).tmp"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KeyError.masterKey.with("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        let text = Array((SHA256.hexString(fresh.bytes) + "\n").utf8)
        let written = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd)
        close(fd)
        defer { unlink(temporary) }
        guard written == text.count, synced == 0 else { throw KeyError.masterKey.with("cannot write \(temporary)") }
        if link(temporary, path) != 0 {
            guard errno == EEXIST, let winner = try readFile(path) else {
                throw KeyError.masterKey.with("cannot create \(path): \(String(cString: strerror(errno)))")
            }
            return winner
        }
        return fresh
    }

    /// The key in `path`, `nil` when there is no such file.
    /// What the group and other permission bits of `mode` allow, for the refusal message: "readable",
    /// "writable", "readable and writable", …. A key others can write is refused like one they can read: whoever
    /// replaces it chooses the key new keys are sealed with.
    private static func openness(_ mode: mode_t) -> String {
        let allowed = [(0o044, "readable"), (0o022, "writable"), (0o011, "executable")].filter { mode & mode_t($0.0) != 0 }.map(\.1)
        return allowed.joined(separator: " and ")
    }

    private static func readFile(_ path: String) throws(KeyError) -> MasterKey? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw KeyError.masterKey.with("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw KeyError.masterKey.with(
                "\(path) is \(openness(info.st_mode)) by other users (mode \(String(info.st_mode & 0o777, radix: 8))); run chmod 600 on it")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw KeyError.masterKey.with("cannot read \(path)")
        }
        do {
            return try MasterKey(hex: String(decoding: data, as: UTF8.self))
        } catch {
            throw KeyError.masterKey.with("\(path) must hold 64 hexadecimal digits")
        }
    }

    static func decodeHex(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        func value(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: c - 48
            case 97...102: c - 87
            case 65...70: c - 55
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = value(digits[index]), let low = value(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    package var description: String { "MasterKey(id: \(id))" }
}
