import Foundation
import HLSDownloader

/// After a prewarm: a note when the item's keys stop being served before the item expires.
///
/// A stored key is served until the earliest of its item's expiry, the origin's `max-age` and `keys.ttl`
/// (docs/keys.md, "Expiry and renewal"); past it the key is fetched again, so with the origin unreachable playback
/// stops there, however long the item itself lasts. `keys.ttl` (24 h by default) is read when the key is stored, so the
/// note says to set it before the prewarm.
enum OfflineKeyNote {
    /// The note for item `id`, or nil when every stored key lasts as long as the item.
    static func note(for id: String, context: ItemContext) -> String? {
        guard let item = try? context.items.item(id), let keys = try? context.downloader.keyStatus(of: id) else { return nil }
        let limits = keys.filter { $0.state == .valid }.compactMap(\.expiresAt)
        guard let earliest = limits.min(), item.expiresAt.map({ earliest < $0 }) ?? true else { return nil }
        let until = ItemFormatter.iso(earliest) ?? ""
        let itemEnd = item.expiresAt.map { "before the item expires (\(ItemFormatter.iso($0) ?? ""))" } ?? "and the item never expires"
        return "the stream's keys are served until \(until), \(itemEnd): with the origin unreachable, playback stops then."
            + " The limit is keys.ttl (24h by default) or the origin's max-age; for longer offline use set keys.ttl"
            + " (config file or HLSCACHE_KEYS_TTL, `none` for no limit) before the prewarm"
    }
}
