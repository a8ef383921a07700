import GRDB

extension ItemStore {
    /// The top URL (multivariant or media playlist) of the item a refused origin request most likely belongs to:
    /// the most recently updated item listing the resource's cache key `key`, else the most recently updated item on
    /// the same origin (`origin` is `scheme://authority`: a segment past the prewarmed part is not listed). Deleted
    /// items are left out. `serve` fetches it again for fresh cookies (a CDN's token cookie set on the playlist).
    package func topURL(forResource key: String, origin: String) throws(DownloadError) -> String? {
        let prefix = origin + "/"
        return try read { db in
            if let url = try String.fetchOne(
                db,
                sql: """
                    SELECT items.url FROM item_resources JOIN items ON items.id = item_resources.item_id
                    WHERE item_resources.key = ? AND items.state != 'deleted' ORDER BY items.updated_at DESC LIMIT 1
                    """,
                arguments: [key])
            {
                return url
            }
            return try String.fetchOne(
                db,
                sql: "SELECT url FROM items WHERE substr(url, 1, ?) = ? AND state != 'deleted' ORDER BY updated_at DESC LIMIT 1",
                arguments: [prefix.unicodeScalars.count, prefix])
        }
    }
}
