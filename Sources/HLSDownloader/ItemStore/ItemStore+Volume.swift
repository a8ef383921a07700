import Foundation
import GRDB

/// The day's download volume (`downloads.dailyLimit`): one row per day in `items.sqlite`, added to by every process
/// that downloads from this cache directory, so `serve` and a `fetch` share one limit.
extension ItemStore {
    /// Adds `bytes` to `day`'s count and returns the new count (what every process recorded that day).
    @discardableResult
    package func addVolume(_ bytes: Int64, day: String) throws(DownloadError) -> Int64 {
        try write { db in
            try db.cachedStatement(
                sql: "INSERT INTO download_volume (day, bytes) VALUES (?, ?) ON CONFLICT(day) DO UPDATE SET bytes = bytes + excluded.bytes"
            ).execute(arguments: [day, bytes])
            // Days long past are of no use; a row a day is kept for the last week.
            try db.execute(sql: "DELETE FROM download_volume WHERE day < ?", arguments: [Self.weekBefore(day)])
            return try Int64.fetchOne(db, sql: "SELECT bytes FROM download_volume WHERE day = ?", arguments: [day]) ?? bytes
        }
    }

    /// The bytes recorded for `day`.
    package func volume(day: String) throws(DownloadError) -> Int64 {
        try read { db in try Int64.fetchOne(db, sql: "SELECT bytes FROM download_volume WHERE day = ?", arguments: [day]) ?? 0 }
    }

    /// Adds `bytes` to the item's count for `day` (its own daily limit) and returns the new count.
    @discardableResult
    package func addItemVolume(_ bytes: Int64, item id: String, day: String) throws(DownloadError) -> Int64 {
        try write { db in
            try db.cachedStatement(
                sql:
                    "INSERT INTO item_volume (item_id, day, bytes) VALUES (?, ?, ?) ON CONFLICT(item_id, day) DO UPDATE SET bytes = bytes + excluded.bytes"
            ).execute(arguments: [id, day, bytes])
            try db.cachedStatement(sql: "DELETE FROM item_volume WHERE day < ?").execute(arguments: [Self.weekBefore(day)])
            return try Int64.fetchOne(db, sql: "SELECT bytes FROM item_volume WHERE item_id = ? AND day = ?", arguments: [id, day]) ?? bytes
        }
    }

    /// The bytes the item fetched from origins on `day` (every process's runs of it).
    package func itemVolume(_ id: String, day: String) throws(DownloadError) -> Int64 {
        try read { db in
            try Int64.fetchOne(db, sql: "SELECT bytes FROM item_volume WHERE item_id = ? AND day = ?", arguments: [id, day]) ?? 0
        }
    }

    /// `YYYY-MM-DD` seven days before `day` (string order is date order).
    static func weekBefore(_ day: String) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        guard let date = formatter.date(from: day) else { return "" }
        return formatter.string(from: date.addingTimeInterval(-7 * 86400))
    }
}
