import ArgumentParser
import Foundation
import HLSCacheCore
import HLSDownloader

/// `hlscache set ID`: changes an item after its creation — its expiry (a rental extended: relative or an absolute
/// date; its keys follow) and its lock.
struct SetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Change an item's expiry (its keys follow) or lock.")

    @OptionGroup var cache: CacheOptions

    @Argument(help: "The item id.")
    var id: String

    @Option(name: .long, help: "Expire the item this long from now (45m, 12h, 7d, 2w), or never.")
    var expires: String?

    @Option(name: .long, help: "Expire the item at this date (ISO 8601, e.g. 2026-12-01T00:00:00Z).")
    var expiresAt: String?

    @Flag(name: .long, help: "Lock the item's objects against eviction.")
    var lock = false

    @Flag(name: .long, help: "Unlock the item's objects.")
    var unlock = false

    @Option(name: .long, help: "The item's own bandwidth cap, bytes per second (e.g. 2MiB), within the process's; none removes it. From its next run.")
    var rate: String?

    @Flag(name: .long, help: "Print the item as a JSON object.")
    var json = false

    func validate() throws {
        if expires != nil && expiresAt != nil { throw ValidationError("give --expires or --expires-at, not both") }
        if lock && unlock { throw ValidationError("give --lock or --unlock, not both") }
        if expires == nil && expiresAt == nil && !lock && !unlock && rate == nil {
            throw ValidationError("nothing to change: give --expires, --expires-at, --lock, --unlock or --rate")
        }
        if let rate, rate.lowercased() != "none", ByteSize(rate).map({ $0.bytes > 0 }) != true {
            throw ValidationError("--rate \(rate): expected a size per second, e.g. 2MiB, or none")
        }
        if let expires, expires.lowercased() != "never", ItemFormatter.duration(expires) == nil {
            throw ValidationError("--expires \(expires): expected e.g. 45m, 12h, 7d, or never")
        }
        if let expiresAt, Self.date(expiresAt) == nil { throw ValidationError("--expires-at \(expiresAt): expected an ISO 8601 date, e.g. 2026-12-01T00:00:00Z") }
    }

    func run() async throws {
        var changes = ItemChanges()
        if let expires {
            changes.expiresAt = .some(expires.lowercased() == "never" ? nil : ItemFormatter.duration(expires).map { Date().addingTimeInterval($0) })
        }
        if let expiresAt { changes.expiresAt = .some(Self.date(expiresAt)) }
        if lock { changes.locked = true }
        if unlock { changes.locked = false }
        if let rate { changes.rateLimit = .some(rate.lowercased() == "none" ? nil : ByteSize(rate)?.bytes) }
        try await ItemContext.with(cache) { context in
            try context.items.recoverInterrupted()
            try context.downloader.expireDue()
            let item = try context.downloader.change(id, changes)
            if json {
                ConsoleOutput.line(ItemFormatter.json(ItemFormatter.dictionary(item, offline: try context.downloader.offlineStatus(of: item))))
                return
            }
            let expiry = ItemFormatter.iso(item.expiresAt).map { "expires \($0)" } ?? "never expires"
            let rate = item.rateLimit.map { ", rate \(ItemFormatter.bytes($0))/s" } ?? ""
            ConsoleOutput.line("\(item.id): \(item.state.rawValue), \(expiry)\(item.locked ? ", locked" : "")\(rate)")
        }
    }

    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
