import Foundation
import GRDB

/// The request headers IPTV channel lists name for their channels (`#EXTVLCOPT:http-user-agent=…`), kept in the
/// index so that after a restart a player asking for a channel's playlist or segment directly still gets them sent
/// to the origin. The store keeps opaque values (the proxy seals them under the master key); newest first, bounded.
extension CacheStore {
    /// The stored values, the most recently learnt first, at most `limit` of them.
    package func channelHeaders(limit: Int) throws -> [(url: String, value: [UInt8])] {
        try index.read { db in
            try Row.fetchAll(db, sql: "SELECT url, value FROM channel_headers ORDER BY learned_at DESC LIMIT ?", arguments: [limit])
                .map { (url: $0["url"] as String, value: [UInt8]($0["value"] as Data)) }
        }
    }

    /// Stores the value of each URL (replacing an older one), then, when `trimTo` is given, drops all but the
    /// `trimTo` most recently learnt.
    package func saveChannelHeaders(_ entries: [(url: String, value: [UInt8])], trimTo: Int? = nil) throws {
        let now = Date().timeIntervalSince1970
        try index.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO channel_headers (url, value, learned_at) VALUES (?, ?, ?)
                    ON CONFLICT(url) DO UPDATE SET value = excluded.value, learned_at = excluded.learned_at
                    """)
            for entry in entries { try statement.execute(arguments: [entry.url, Data(entry.value), now]) }
            if let trimTo {
                try db.execute(
                    sql: """
                        DELETE FROM channel_headers WHERE url IN
                          (SELECT url FROM channel_headers ORDER BY learned_at DESC LIMIT -1 OFFSET ?)
                        """,
                    arguments: [trimTo])
            }
        }
    }
}
