import ArgumentParser
import Foundation
import HLSCacheCore
import HLSDownloader

/// `hlscache set ID`: changes an item after its creation — its expiry (a rental extended: relative or an absolute
/// date; its keys follow) and its lock.
struct SetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Change an item's expiry, lock, policies or metadata.")

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

    @Option(
        name: .long,
        help: "The item's own bandwidth cap, bytes per second (e.g. 2MiB), within the process's; none removes it. From its next run.")
    var rate: String?

    @Option(name: .long, help: "The item's maximum size (e.g. 2GiB), or none (downloads.maxItemSize applies).")
    var maxSize: String?

    @Option(name: .long, help: "Hours `serve` may download the item, HH:MM-HH:MM local time, or none (downloads.window applies).")
    var window: String?

    @Option(
        name: .long,
        help: "What the item may fetch from origins per day (e.g. 500MiB), within downloads.dailyLimit; none removes it. From its next run."
    )
    var dailyLimit: String?

    @Option(name: .long, help: "The item's title; an empty string removes it.")
    var title: String?

    @Option(name: .long, help: "The item's tags, replacing the old ones (repeatable).")
    var tag: [String] = []

    @Flag(name: .long, help: "Remove every tag.")
    var clearTags = false

    @Option(name: .long, help: "A poster image URL (stored at the item's next run); none removes it.")
    var poster: String?

    @Option(name: .long, help: "Your own JSON object kept with the item, replacing the old one; none removes it.")
    var meta: String?

    @Flag(name: .long, help: "Print the item as a JSON object.")
    var json = false

    func validate() throws {
        if expires != nil && expiresAt != nil { throw ValidationError("give --expires or --expires-at, not both") }
        if lock && unlock { throw ValidationError("give --lock or --unlock, not both") }
        if tag.isEmpty == false && clearTags { throw ValidationError("give --tag or --clear-tags, not both") }
        if (try metadataChanges()).isEmpty && expires == nil && expiresAt == nil && !lock && !unlock && rate == nil {
            throw ValidationError(
                "nothing to change: give --expires, --expires-at, --lock, --unlock, --rate, --max-size, --window, --daily-limit, --title, --tag, --clear-tags, --poster or --meta"
            )
        }
        if let rate, rate.lowercased() != "none", ByteSize(rate).map({ $0.bytes > 0 }) != true {
            throw ValidationError("--rate \(rate): expected a size per second, e.g. 2MiB, or none")
        }
        if let expires, expires.lowercased() != "never", ItemFormatter.duration(expires) == nil {
            throw ValidationError("--expires \(expires): expected e.g. 45m, 12h, 7d, or never")
        }
        if let expiresAt, Self.date(expiresAt) == nil {
            throw ValidationError("--expires-at \(expiresAt): expected an ISO 8601 date, e.g. 2026-12-01T00:00:00Z")
        }
    }

    /// The metadata and policy changes asked for, checked.
    func metadataChanges() throws -> ItemChanges {
        var changes = ItemChanges()
        do throws(ItemMetadata.Problem) {
            if let title { changes.title = .some(title.isEmpty ? nil : try ItemMetadata.title(title)) }
            if !tag.isEmpty { changes.tags = try ItemMetadata.tags(tag) }
            if clearTags { changes.tags = [] }
            if let poster { changes.posterURL = .some(poster.lowercased() == "none" ? nil : try ItemMetadata.poster(poster)) }
            if let meta { changes.metadata = .some(meta.lowercased() == "none" ? nil : try ItemMetadata.meta(text: meta)) }
        } catch {
            throw ValidationError(error.message)
        }
        if let maxSize {
            if maxSize.lowercased() == "none" {
                changes.maxBytes = .some(nil)
            } else {
                guard let bytes = ByteSize(maxSize)?.bytes, bytes > 0 else {
                    throw ValidationError("--max-size \(maxSize): expected a size, e.g. 2GiB, or none")
                }
                changes.maxBytes = .some(bytes)
            }
        }
        if let dailyLimit {
            if dailyLimit.lowercased() == "none" {
                changes.dailyBytes = .some(nil)
            } else {
                guard let bytes = ByteSize(dailyLimit)?.bytes, bytes > 0 else {
                    throw ValidationError("--daily-limit \(dailyLimit): expected a size, e.g. 500MiB, or none")
                }
                changes.dailyBytes = .some(bytes)
            }
        }
        if let window {
            if window.lowercased() == "none" {
                changes.downloadWindow = .some(nil)
            } else {
                guard let parsed = DownloadWindow(parsing: window) else {
                    throw ValidationError("--window \(window): expected HH:MM-HH:MM, or none")
                }
                changes.downloadWindow = .some(parsed)
            }
        }
        return changes
    }

    func run() async throws {
        var changes = try metadataChanges()
        if let expires {
            changes.expiresAt = .some(
                expires.lowercased() == "never" ? nil : ItemFormatter.duration(expires).map { Date().addingTimeInterval($0) })
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
                ConsoleOutput.line(
                    ItemFormatter.json(ItemFormatter.dictionary(item, offline: try context.downloader.offlineStatus(of: item))))
                return
            }
            let expiry = ItemFormatter.iso(item.expiresAt).map { "expires \($0)" } ?? "never expires"
            let rate = item.rateLimit.map { ", rate \(ItemFormatter.bytes($0))/s" } ?? ""
            let daily = item.dailyBytes.map { ", daily limit \(ItemFormatter.bytes($0))" } ?? ""
            let title = item.title.map { ", \"\($0)\"" } ?? ""
            let tags = item.tags.isEmpty ? "" : ", tags \(item.tags.joined(separator: ","))"
            ConsoleOutput.line(
                "\(item.id): \(item.state.rawValue), \(expiry)\(item.locked ? ", locked" : "")\(rate)\(daily)\(title)\(tags)")
        }
    }

    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
